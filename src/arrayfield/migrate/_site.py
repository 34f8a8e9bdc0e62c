"""What a rule is given about one annotated field of a Module class, and the
edits a rule may ask of its statement.

Its nodes are `ast` nodes (`_read` reads the file).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

from . import _syntax as syntax
from ._bindings import ImportMap
from ._diagnostics import Diagnostic
from ._index import ClassContext, FileContext

# `self.<attr> = value` in a method of the class: (attr, value, statement).
Assignment = tuple[str, Any, Any]


class FieldEdit(enum.Enum):
    """What the rewrite does to a field statement beyond its annotation."""

    DROP_CONVERTER = enum.auto()  # eqx.field(converter=jnp.asarray, static=False)
    DROP_DEFAULT = enum.auto()  # = eqx.field(converter=jnp.asarray)
    # A rule's fix under --fix: `= af.field(convert=False)` on a shape field
    # (AF002), or on a number that would become trainable (AF007).
    NO_CONVERT = enum.auto()


class CallContext(Protocol):
    """What a call rule may ask of the file around a call (`_plan.Plan` answers)."""

    # Inside a function: whether a cache decorator wraps it; None outside any.
    cached_function: bool | None

    def position(self, node: Any) -> tuple[int, int]: ...

    def snippet(self, node: Any) -> str: ...

    def module_base(self, expr: Any) -> bool:
        """Whether a base expression is a Module class or equinox's Module."""
        ...

    def migrated_class(self, name: str) -> bool:
        """Whether a name (as written in the file) is a Module class this run
        migrates."""
        ...


class FieldReading(NamedTuple):
    """What the driver read of a field once, for every rule (`_checks`).

    - `kind`: the array kind its annotation declares, or None (not an array).
    - `static`: declared `static=True`.
    - `opted_out`: declared `convert=False`.
    - `makes_array`: its converter makes arrays (`jnp.asarray`, ...).
    - `migrating`: its class becomes an `af.ArrayModule` in this run.
    """

    kind: Any
    static: bool
    opted_out: bool
    makes_array: bool
    migrating: bool

    @property
    def python_leaf(self) -> bool:
        """A leaf that holds what it is given: no array annotation, not
        static, no converter that makes arrays (AF001, AF005 read it)."""
        return self.kind is None and not self.static and not self.makes_array

    @property
    def converts(self) -> bool:
        """An array field arrayfield converts: not static, no `convert=False`
        (AF002, AF007 read it)."""
        return self.kind is not None and not self.static and not self.opted_out


class FieldSite(NamedTuple):
    """One field statement `name: annotation = value` in a Module class body.

    **Fields:**

    - `cls`: the class's qualified name, `Scene.Config`.
    - `node`: the statement (its `.target` is a name, its `.value` the value).
    - `call`: `value` when it is a field specifier (`eqx.field(...)`,
        `af.field(...)`, `dataclasses.field(...)`), else None.
    - `assignments`: the `self.<attr> = value` statements of the class's methods.
    - `context`, `file`: what the project index knows about the class and the
        file (None without an index).
    - `imports`: the file's import map.
    - `position`: line and column (1-based) of a node of the file.
    - `snippet`: a node's source on one line, cut to 40 characters.
    - `module_values`: module-level names bound once in the file, to the value
        (None for a name bound more than once).
    - `keywords`: the keyword arguments of `call`, each with a `.value`.
    """

    cls: str
    node: Any
    call: Any | None
    assignments: list[Assignment]
    context: ClassContext | None
    file: FileContext | None
    imports: ImportMap
    position: Callable[[Any], tuple[int, int]]
    snippet: Callable[[Any], str]
    module_values: Mapping[str, Any]

    keywords: dict[str, Any]

    @property
    def name(self) -> str:
        return self.node.target.id

    @property
    def annotation(self) -> Any:
        return self.node.annotation

    @property
    def default(self) -> Any | None:
        """The class default: the value, or a specifier's `default=`."""
        if self.call is None:
            return self.node.value
        arg = self.keywords.get("default")
        return None if arg is None else arg.value

    def values(self) -> list[tuple[Any, Any | None]]:
        """The class default (with None) and each value a method assigns the
        field (with its statement), in that order."""
        default = self.default
        found = [] if default is None else [(default, None)]
        return found + [
            (value, node) for attr, value, node in self.assignments if attr == self.name
        ]

    def uses(self) -> dict[str, str]:
        """Kind of use -> `path:line` of its first, in the class or a subclass."""
        return {} if self.context is None else self.context.uses.get(self.name, {})

    def assigns(self) -> dict[str, str]:
        """Kind of value assigned -> `path:line` of the first such assignment."""
        if self.context is None:
            return {}
        return self.context.assigns.get(self.name, {})

    def report(
        self, code: str, message: str, *, fixable: bool = False, undecided: bool = False
    ) -> Diagnostic:
        """A diagnostic at the field's name."""
        line, col = self.position(self.node.target)
        return Diagnostic(line, col, code, message, fixable, undecided)


def is_name(expr: Any | None, value: str) -> bool:
    """Whether `expr` is the bare name `value` (`True`, `False`)."""
    return expr is not None and syntax.identifier(expr) == value
