"""Small readers of `ast` expressions, each answering one question about a
node, shared by the checks (`_checks`), the annotation readers
(`_annotations`) and the plan (`_plan`)."""

from __future__ import annotations

import ast
from typing import Any

# Constants that read as names.
_NAMED_CONSTANTS = {True: "True", False: "False", None: "None"}


def identifier(node: Any) -> str | None:
    """`x` for the bare name `x` (and `True`, `False`, `None`), else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and (
        node.value is None or isinstance(node.value, bool)
    ):
        return _NAMED_CONSTANTS[node.value]
    return None


def parse_expression(text: str) -> ast.expr | None:
    """`text` parsed as an expression, or None."""
    try:
        return ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return None


def number_type(node: Any) -> type | None:
    """`int`, `float` or `complex` for a number literal, with or without a sign
    (`-1e-6`), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, complex):
        return type(node.value)
    return None


def subscript_items(node: Any) -> list[Any]:
    """The index expressions of a subscript, slices left out: `[Array, "n"]`
    for `Float[Array, "n"]`."""
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return [item for item in items if not isinstance(item, ast.Slice)]


def display_elements(node: Any) -> list[tuple[bool, Any]] | None:
    """`(starred, value)` for each element of a tuple or list display, else None."""
    if not isinstance(node, ast.Tuple | ast.List):
        return None
    return [
        (True, e.value) if isinstance(e, ast.Starred) else (False, e) for e in node.elts
    ]


def call_arguments(node: ast.Call) -> list[Any]:
    """The arguments of a call in source order: a `Starred`, a `keyword` or a
    plain expression (which `argument_value` reads)."""
    arguments: list[Any] = [*node.args, *node.keywords]
    if node.keywords and node.args:
        arguments.sort(key=lambda arg: (arg.lineno, arg.col_offset))
    return arguments


def argument_value(argument: Any) -> Any:
    """The expression an argument of `call_arguments` passes."""
    if isinstance(argument, ast.Starred | ast.keyword):
        return argument.value
    return argument


def call_keywords(node: ast.Call) -> dict[str, Any]:
    """Keyword name -> its argument (with a `.value`) for a call."""
    return {kw.arg: kw for kw in node.keywords if kw.arg is not None}


def class_made_by_type(node: ast.Call) -> tuple[Any, list[Any]] | None:
    """`(name, [Base, ...])` for `type(name, (Base, ...), namespace)`, else None."""
    if identifier(node.func) != "type":
        return None
    arguments = call_arguments(node)
    bases = argument_value(arguments[1]) if len(arguments) == 3 else None
    if not isinstance(bases, ast.Tuple):
        return None
    name = argument_value(arguments[0])
    return name, [value for _, value in display_elements(bases) or []]
