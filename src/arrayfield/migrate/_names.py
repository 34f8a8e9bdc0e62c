"""Dotted names (`eqx.Module`, `jax.numpy.asarray`) read off a syntax tree."""

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
