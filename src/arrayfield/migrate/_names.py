"""Dotted names (`eqx.Module`, `jax.numpy.asarray`) read off a syntax tree."""

from __future__ import annotations

import ast
from typing import Any


def dotted_name(node: Any) -> str | None:
    """`a.b.c` for a name or a chain of attribute lookups on one, else None.

    Works on `ast` and libcst nodes alike, which both call these nodes `Name` and
    `Attribute`: the index (`ast`) and the rewrite (libcst) must agree on what a
    base or a call is named, so they share this one reading.
    """
    kind = type(node).__name__
    if kind == "Name":
        return node.id if isinstance(node, ast.Name) else node.value
    if kind == "Attribute":
        head = dotted_name(node.value)
        attr = node.attr if isinstance(node.attr, str) else node.attr.value
        return None if head is None else f"{head}.{attr}"
    return None
