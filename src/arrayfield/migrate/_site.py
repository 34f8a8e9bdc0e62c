"""What a check is given about one annotated field of a Module class."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import libcst as cst

from ._imports import ImportMap
from ._index import ClassContext, FileContext

# `self.<attr> = value` in a method of the class: (attr, value, statement).
Assignment = tuple[str, cst.BaseExpression, cst.CSTNode]


@dataclasses.dataclass(frozen=True)
class FieldSite:
    """One field statement `name: annotation = value` in a Module class body.

    **Fields:**

    - `cls`: the class's qualified name, `Scene.Config`.
    - `node`: the statement.
    - `call`: `value` when it is a field specifier (`eqx.field(...)`,
        `af.field(...)`, `dataclasses.field(...)`), else None.
    - `keywords`: the keyword arguments of `call`.
    - `assignments`: the `self.<attr> = value` statements of the class's methods.
    - `context`: what the project index knows about the class (None without one).
    - `file`: what the project index knows about the file (None without one).
    - `imports`: the file's import map.
    - `position`: line and column (1-based) of a node of the file.
    """

    cls: str
    node: cst.AnnAssign
    call: cst.Call | None
    keywords: dict[str, cst.Arg]
    assignments: list[Assignment]
    context: ClassContext | None
    file: FileContext | None
    imports: ImportMap
    position: Callable[[cst.CSTNode], tuple[int, int]]

    @property
    def name(self) -> str:
        assert isinstance(self.node.target, cst.Name)
        return self.node.target.value

    @property
    def target(self) -> cst.Name:
        assert isinstance(self.node.target, cst.Name)
        return self.node.target

    @property
    def annotation(self) -> cst.BaseExpression:
        return self.node.annotation.annotation

    @property
    def default(self) -> cst.BaseExpression | None:
        """The class default: the value, or a specifier's `default=`."""
        if self.call is None:
            return self.node.value
        arg = self.keywords.get("default")
        return None if arg is None else arg.value

    def uses(self) -> dict[str, str]:
        """Kind of use -> `path:line` of its first, in the class or a subclass."""
        return {} if self.context is None else self.context.uses.get(self.name, {})

    def assigns(self) -> dict[str, str]:
        """Kind of value assigned -> `path:line` of the first such assignment."""
        if self.context is None:
            return {}
        return self.context.assigns.get(self.name, {})


def is_name(expr: cst.BaseExpression | None, value: str) -> bool:
    """Whether `expr` is the bare name `value` (`True`, `False`)."""
    return isinstance(expr, cst.Name) and expr.value == value


def snippet(node: cst.CSTNode, limit: int = 40) -> str:
    """The node's source on one line, cut to `limit` characters."""
    text = " ".join(cst.Module(body=[]).code_for_node(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
