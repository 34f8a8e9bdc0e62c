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


def attribute_name(node: Any) -> str | None:
    """`shape` for `x.shape`, else None."""
    return node.attr if isinstance(node, ast.Attribute) else None


def string_value(node: Any) -> str | None:
    """The text of a str literal (not formatted)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def segment(lines: list[bytes], node: ast.AST) -> str:
    """The source of an `ast` node; `lines` are the UTF-8 lines, ends kept."""
    start, end = node.lineno - 1, node.end_lineno or node.lineno  # type: ignore[attr-defined]
    if start == end - 1:
        line = lines[start]
        return line[node.col_offset : node.end_col_offset].decode()  # type: ignore[attr-defined]
    chunk = b"".join(lines[start:end])
    tail = len(lines[end - 1]) - node.end_col_offset  # type: ignore[attr-defined]
    return chunk[node.col_offset : len(chunk) - tail].decode()  # type: ignore[attr-defined]


def parse_expression(text: str) -> ast.expr | None:
    """`text` parsed as an expression, or None."""
    try:
        return ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return None


def number_type(node: Any) -> type | None:
    """`int`, `float` or `complex` for an unsigned number literal, else None."""
    if isinstance(node, ast.Constant) and not isinstance(node.value, bool):
        kind = type(node.value)
        return kind if kind in (int, float, complex) else None
    return None


def unary(node: Any) -> tuple[str, Any] | None:
    """`("-", x)` for `-x`, `("+", x)` for `+x`, else None."""
    if isinstance(node, ast.UnaryOp):
        sign = {ast.USub: "-", ast.UAdd: "+"}.get(type(node.op))
        return None if sign is None else (sign, node.operand)
    return None


def signed_number_type(node: Any) -> type | None:
    """`number_type` of a number literal with or without a sign (`-1e-6`)."""
    signed = unary(node)
    return number_type(node if signed is None else signed[1])


def union_operands(node: Any) -> tuple[Any, Any] | None:
    """`(X, Y)` for `X | Y`, else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return node.left, node.right
    return None


def is_subscript(node: Any) -> bool:
    """Whether `node` is `value[...]` (its `.value` is the subscripted part)."""
    return isinstance(node, ast.Subscript)


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


def is_call(node: Any) -> bool:
    """Whether `node` is a call (its `.func` is what is called)."""
    return isinstance(node, ast.Call)


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


def is_plain_positional(argument: Any) -> bool:
    """Whether an argument of `call_arguments` is `f(x)`'s x: no keyword, no star."""
    return not isinstance(argument, ast.Starred | ast.keyword)


def call_keywords(node: ast.Call) -> dict[str, Any]:
    """Keyword name -> its argument (with a `.value`) for a call."""
    return {kw.arg: kw for kw in node.keywords if kw.arg is not None}
