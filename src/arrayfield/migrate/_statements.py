"""Walking a libcst tree statement by statement, without a visitor.

A libcst visitor rebuilds every node it passes, expressions included, which
costs several times more than following the statement bodies alone; the import
map and the class analysis need only statements.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import libcst as cst

from ._bindings import NESTED_BODIES


def _nested(node: cst.CSTNode) -> Iterable[cst.CSTNode | Sequence[cst.CSTNode]]:
    """The statement bodies inside a compound statement or a suite."""
    for name in NESTED_BODIES:
        nested = getattr(node, name, None)
        if isinstance(nested, cst.CSTNode | list | tuple):
            yield nested


def small_statements(
    body: Sequence[cst.CSTNode] | cst.CSTNode,
) -> Iterable[cst.BaseSmallStatement]:
    """Every simple statement (`x = 1`, `import y`...) in a body, at any depth
    of nested blocks, functions and classes."""
    if isinstance(body, cst.BaseSmallStatement):
        yield body
        return
    if isinstance(body, cst.SimpleStatementLine | cst.SimpleStatementSuite):
        yield from body.body
        return
    if isinstance(body, cst.CSTNode):
        for nested in _nested(body):
            yield from small_statements(nested)
        return
    for statement in body:
        yield from small_statements(statement)


Definition = cst.ClassDef | cst.FunctionDef


def walk_definitions(
    body: Sequence[cst.CSTNode] | cst.CSTNode,
    enter: Callable[[Definition], object],
    leave: Callable[[Definition], object],
) -> None:
    """Call `enter` and `leave` around every class and function statement in
    `body`, at any depth, outer ones first, as a visitor's `visit_ClassDef` and
    `leave_ClassDef` would be called."""
    if isinstance(body, cst.ClassDef | cst.FunctionDef):
        enter(body)
        walk_definitions(body.body, enter, leave)
        leave(body)
        return
    if isinstance(body, cst.CSTNode):
        for nested in _nested(body):
            walk_definitions(nested, enter, leave)
        return
    for statement in body:
        if not isinstance(statement, cst.BaseSmallStatement):
            walk_definitions(statement, enter, leave)
