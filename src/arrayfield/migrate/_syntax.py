"""Small readers of `ast` expressions, each answering one question."""

from __future__ import annotations

import ast
from typing import Any


def dotted_name(node: Any) -> str | None:
    """`a.b.c` for a name or a chain of attribute lookups on one, else None:
    the one reading of what a base or a call is named, for every module."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = dotted_name(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def identifier(node: Any) -> str | None:
    """`x` for the bare name `x` (and `True`, `False`, `None`), else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and (
        node.value is None or isinstance(node.value, bool)
    ):
        return str(node.value)
    return None


def parse_expression(text: str) -> ast.expr | None:
    """`text` parsed as an expression, or None."""
    try:
        return ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError):
        return None


def number_type(node: Any) -> type | None:
    """`int`, `float` or `complex` for a number literal, signed or not (`-1e-6`)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, complex):
        return type(node.value)
    return None


def subscript_items(node: Any) -> list[Any]:
    """`[Array, "n"]` for `Float[Array, "n"]`, slices left out."""
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return [item for item in items if not isinstance(item, ast.Slice)]


def argument_value(argument: Any) -> Any:
    """The expression a call's argument (a `Starred`, a `keyword`) passes."""
    if isinstance(argument, ast.Starred | ast.keyword):
        return argument.value
    return argument


def class_made_by_type(node: ast.Call) -> tuple[Any, list[Any]] | None:
    """`(name, [Base, ...])` for `type(name, (Base, ...), namespace)`, else None."""
    if identifier(node.func) != "type":
        return None
    # In source order: a keyword may come before a `*args`.
    arguments = sorted(
        [*node.args, *node.keywords], key=lambda arg: (arg.lineno, arg.col_offset)
    )
    bases = argument_value(arguments[1]) if len(arguments) == 3 else None
    if not isinstance(bases, ast.Tuple):
        return None
    return argument_value(arguments[0]), [argument_value(e) for e in bases.elts]
