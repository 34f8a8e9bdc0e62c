"""What a rule is given about one annotated field of a Module class (its nodes
are `ast` nodes, read by `_read`), and the edits it may ask of the statement."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from ._bindings import ImportMap
from ._diagnostics import Diagnostic
from ._index import ClassContext, FileContext

# `self.<attr> = value` in a method of the class: (attr, value, statement).
Assignment = tuple[str, Any, Any]


class FieldEdit(enum.Enum):
    """What the rewrite does to a field statement beyond its annotation."""

    DROP_CONVERTER = enum.auto()  # eqx.field(converter=jnp.asarray, static=False)
    DROP_DEFAULT = enum.auto()  # = eqx.field(converter=jnp.asarray)
    NO_CONVERT = enum.auto()  # a rule's fix: `= af.field(convert=False)`


class FieldSite(NamedTuple):
    """One field statement `name: annotation = value` in a Module class body."""

    cls: str  # the class's qualified name, `Scene.Config`
    node: Any
    call: Any | None  # the value, when it is `eqx.field(...)` or another specifier
    assignments: list[Assignment]
    # What the project index knows of the class and the file (None without one).
    context: ClassContext | None
    file: FileContext | None
    imports: ImportMap
    position: Callable[[Any], tuple[int, int]]  # line and column, 1-based
    snippet: Callable[[Any], str]  # a node's source on one line, cut to 40
    # Module-level names bound once, to the value (None: bound more than once).
    module_values: Mapping[str, Any]
    keywords: dict[str, Any]  # the values of `call`'s keyword arguments
    kind: Any  # the array kind its annotation declares, or None: no array
    static: bool
    opted_out: bool  # `convert=False`
    makes_array: bool  # its converter makes arrays (`jnp.asarray`...)
    migrating: bool  # its class becomes an `af.ArrayModule` in this run

    @property
    def python_leaf(self) -> bool:
        """A leaf that holds what it is given."""
        return self.kind is None and not self.static and not self.makes_array

    @property
    def converts(self) -> bool:
        """An array field arrayfield converts: not static, no `convert=False`."""
        return self.kind is not None and not self.static and not self.opted_out

    @property
    def name(self) -> str:
        return self.node.target.id

    @property
    def annotation(self) -> Any:
        return self.node.annotation

    @property
    def default(self) -> Any | None:
        """The class default: the value, or a specifier's `default=`."""
        return self.node.value if self.call is None else self.keywords.get("default")

    def values(self) -> Iterator[tuple[Any, int | None]]:
        """The class default (line None), then each value a method assigns it."""
        default = self.default
        if default is not None:
            yield default, None
        for attr, value, statement in self.assignments:
            if attr == self.name:
                yield value, statement.lineno

    def given(self, value: Any, line: int | None, verb: str) -> str:
        """For a message: "defaults to `1.0`", or "<verb> `1.0` on line 12"."""
        written = self.snippet(value)
        if line is None:
            return f"defaults to `{written}`"
        return f"{verb} `{written}` on line {line}"

    def uses(self) -> dict[str, str]:
        """Kind of use -> `path:line` of its first, in the class or a subclass."""
        return {} if self.context is None else self.context.uses.get(self.name, {})

    def assigns(self) -> dict[str, str]:
        """Kind of value assigned -> `path:line` of the first such assignment."""
        return {} if self.context is None else self.context.assigns.get(self.name, {})

    def report(
        self,
        code: str,
        text: str,
        *,
        at: Any = None,
        fixable: bool = False,
        undecided: bool = False,
    ) -> Diagnostic:
        """The diagnostic "field 'Cls.name' <text>", at the field's name or `at`."""
        line, col = self.position(self.node.target if at is None else at)
        message = f"field '{self.cls}.{self.name}' {text}"
        return Diagnostic(line, col, code, message, fixable, undecided)
