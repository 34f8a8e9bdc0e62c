"""The plan of a file's migration.

`Plan` holds what the analysis of one file decides: which classes are Module
classes, which edits the rewrite makes (`base_edits`, `field_edits`...) and the
diagnostics, from running the rules of `_checks` on every field and call. Its
walker (`_read`) only finds the classes, functions, fields and
`self.<attr> = ...` statements of a file's `ast` tree, and says where a node is
and what its source text is; every decision is taken here, and `_splice`
writes the edits.
"""

from __future__ import annotations

import ast
from typing import Any

from . import _diagnostics as diag
from . import _syntax as syntax
from ._annotations import ArrayKind, array_kind, is_class_var, is_field_wrapped
from ._bindings import ImportMap
from ._checks import CALL_RULES, FIELD_RULES, af004_converter_kind
from ._diagnostics import Diagnostic
from ._index import ClassContext, FileContext
from ._names import dotted_name
from ._site import FieldEdit, FieldReading, FieldSite, is_name

# Converters that make the array kind arrayfield makes for an annotation of
# that kind anyway: redundant under ArrayModule.
CONVERTER_KINDS: dict[str, ArrayKind] = {
    "jax.numpy.asarray": "jax",
    "jax.numpy.array": "jax",
    "numpy.asarray": "numpy",
    "numpy.array": "numpy",
}
# Field specifiers: their call, as a field's value, is not the field's default.
SPECIFIERS = frozenset({"equinox.field", "arrayfield.field", "dataclasses.field"})


def _is_cache(expr: Any) -> bool:
    """`@functools.cache`, `@lru_cache(maxsize=None)` and the like: a
    decorator's expression."""
    if isinstance(expr, ast.Call):
        expr = expr.func
    return (dotted_name(expr) or "").rpartition(".")[2] in ("cache", "lru_cache")


def _unsubscripted(expr: Any) -> Any:
    """`Parent` for the base `Parent[int]` of a generic class."""
    return expr.value if isinstance(expr, ast.Subscript) else expr


class Plan:
    """What to rewrite in one file, and its diagnostics; changes nothing.

    The reader (`_read`) calls `module_assignment` for each `name = value` of
    the module body, `enter_function`/`leave_function` and
    `enter_class`/`leave_class` around every definition (outer ones first),
    and `call` for each call of a file that `_checks.calls_matter` admits; it
    implements `position`, `snippet` and `field_sites`.
    """

    def __init__(
        self,
        imports: ImportMap,
        context: FileContext | None,
        fix: bool,
        typed: bool,
        source: str | None = None,
    ) -> None:
        # The source text, for noqa comments (read only when --fix edits).
        self.source = source
        self._lines: list[str] | None = None
        # Field positions the project index read with `ast`.
        self.known_positions: dict[Any, tuple[int, int]] = {}
        self.imports = imports
        self.context = context
        self.fix = fix
        self.typed = typed
        self.module_classes: set[str] = set()
        # Module classes that derive from equinox's Module, not af.ArrayModule:
        # the rewrite changes what their fields hold.
        self.migrating_classes: set[str] = set()
        self.base_edits: dict[Any, list[int]] = {}
        self.field_edits: dict[Any, FieldEdit] = {}
        # Annotations to wrap in `af.Field[...]`, and bare defaults to write as
        # `af.field(default=...)` (what a type checker needs for that spelling).
        self.wrap_annotations: set[Any] = set()
        self.wrap_defaults: set[Any] = set()
        # `Base = eqx.Module` and the base in `type(name, (eqx.Module,), ns)`:
        # expressions that become a reference to ArrayModule.
        self.expression_edits: set[Any] = set()
        # Module-level names bound to equinox's Module by an assignment.
        self.module_aliases: set[str] = set()
        # Module-level names bound by one `name = value` statement, to that value
        # (None for a name bound more than once): what a field default names.
        self.module_values: dict[str, Any] = {}
        # Names whose last use may have been rewritten away (`eqx`, `jnp`...).
        self.released_names: set[str] = set()
        self.diagnostics: list[Diagnostic] = []
        # Qualified name of each enclosing class, None for a function: classes
        # are named as arrayfield's runtime errors name them, `Scene.Config`,
        # with the part up to a function's `<locals>` left out.
        self._scopes: list[str | None] = []
        # Per enclosing function: whether it is functools.cache'd.
        self._cached: list[bool] = []

    # What the reader (`_read`) provides.

    def position(self, node: Any) -> tuple[int, int]:
        """Line and column (1-based) of `node`."""
        raise NotImplementedError

    def snippet(self, node: Any) -> str:
        """The node's source on one line, cut to 40 characters."""
        raise NotImplementedError

    def field_sites(self, node: Any, qualname: str) -> list[FieldSite]:
        """The `name: annotation = value` fields of class statement `node`."""
        raise NotImplementedError

    # The decisions.

    @property
    def changes(self) -> bool:
        """Whether the rewrite edits the file: a base, an alias, a field."""
        return bool(
            self.base_edits
            or self.expression_edits
            or self.wrap_annotations
            or self.field_edits
            or self.wrap_defaults
        )

    def names_needed(self) -> list[str]:
        """Which of arrayfield's `ArrayModule`, `Field` and `field` the
        rewritten code refers to."""
        no_convert = FieldEdit.NO_CONVERT in self.field_edits.values()
        return [
            name
            for name, edits in (
                ("ArrayModule", self.base_edits or self.expression_edits),
                ("Field", self.wrap_annotations),
                ("field", self.wrap_defaults or no_convert),
            )
            if edits
        ]

    def reported(self) -> tuple[Diagnostic, ...]:
        """The diagnostics no `# noqa` silences, sorted by position."""
        return tuple(
            sorted(d for d in self.diagnostics if not self._suppressed(d.line, d.code))
        )

    def _suppressed(self, line: int, code: str) -> bool:
        """Whether `# noqa` on `line` silences `code`: a silenced fix is not made."""
        if self.source is None:
            return False
        if self._lines is None:
            self._lines = diag.source_lines(self.source)
        return diag.suppressed(self._lines, line, code)

    def _release(self, expr: Any) -> None:
        """The name `expr` starts with (`eqx` for `eqx.field`, bound by an
        import) may have lost its last use to the rewrite."""
        dotted = dotted_name(expr)
        if dotted is not None:
            self.released_names.add(dotted.partition(".")[0])

    def _is_equinox_module(self, expr: Any) -> bool:
        if self.imports.resolve(expr) == "equinox.Module":
            return True
        # `from .core import Module` where core imports it from equinox.
        return (
            self.context is not None and dotted_name(expr) in self.context.equinox_bases
        )

    def module_assignment(self, targets: list[Any], value: Any) -> None:
        """A module-level `targets = value` statement: `Base = eqx.Module`."""
        for target in targets:
            bound = syntax.identifier(target)
            if bound is not None:
                seen = bound in self.module_values
                self.module_values[bound] = None if seen else value
        if len(targets) != 1 or not self._is_equinox_module(value):
            return
        name = syntax.identifier(targets[0])
        if name is None:
            return
        self.module_aliases.add(name)
        self.expression_edits.add(value)
        self._release(value)

    def call(self, node: Any) -> None:
        """A call: the bases of a `type(...)` that makes a Module class are
        migrated, then every call rule reads it."""
        self._type_call(node)
        for rule in CALL_RULES:
            self.diagnostics.extend(rule.check_call(node, self))

    @property
    def cached_function(self) -> bool | None:
        """Inside a function: whether a cache decorator wraps it (`CallContext`)."""
        return self._cached[-1] if self._cached else None

    def module_base(self, expr: Any) -> bool:
        """Whether a base is equinox's Module, an alias of it or a Module class."""
        if self._is_equinox_module(expr):
            return True
        name = dotted_name(_unsubscripted(expr))
        return name in self.module_aliases or self.migrated_class(name)

    def migrated_class(self, name: str | None) -> bool:
        """Whether `name` is a Module class of the file or of the tree."""
        return name in self.module_classes or (
            self.context is not None and name in self.context.bases
        )

    def _type_call(self, node: Any) -> None:
        """`type(name, (eqx.Module, ...), namespace)`: equinox's Module among the
        bases becomes `af.ArrayModule`."""
        made = syntax.class_made_by_type(node)
        for base in [] if made is None else made[1]:
            if self._is_equinox_module(base):
                self.expression_edits.add(base)
                self._release(base)

    def enter_function(self, decorators: list[Any]) -> None:
        """A function statement, by its decorators' expressions."""
        self._scopes.append(None)
        self._cached.append(any(map(_is_cache, decorators)))

    def leave_function(self) -> None:
        self._scopes.pop()
        self._cached.pop()

    def enter_class(self, node: Any, name: str, bases: list[Any]) -> None:
        """A class statement `node` named `name`, by its bases' expressions."""
        outer = self._scopes[-1] if self._scopes else None
        qualname = name if outer is None else f"{outer}.{name}"
        self._scopes.append(qualname)
        equinox_bases = [
            index for index, base in enumerate(bases) if self._is_equinox_module(base)
        ]
        written = [_unsubscripted(base) for base in bases]
        base_names = [dotted_name(base) for base in written]
        already_migrated = any(
            base in self.module_classes for base in base_names
        ) or any(
            self.imports.resolve(base) == "arrayfield.ArrayModule" for base in written
        )
        # A subclass of an alias such as `Base = eqx.Module`, or (known from the
        # project index) of a Module class defined in another module.
        aliased = any(base in self.module_aliases for base in base_names)
        context = self._class_context(qualname)
        if not (equinox_bases or already_migrated or aliased or context is not None):
            return
        self.module_classes.add(name)
        if (
            equinox_bases
            or aliased
            or any(base in self.migrating_classes for base in base_names)
            or (context is not None and context.from_equinox)
        ):
            self.migrating_classes.add(name)
        if equinox_bases:
            self.base_edits[node] = equinox_bases
            for index in equinox_bases:
                self._release(bases[index])
        drop_converters = bool(equinox_bases or already_migrated)
        for site in self.field_sites(node, qualname):
            self._analyse_field(site, drop_converters)

    def leave_class(self) -> None:
        self._scopes.pop()

    def _class_context(self, cls: str) -> ClassContext | None:
        return None if self.context is None else self.context.classes.get(cls)

    def specifier_call(self, value: Any | None) -> Any | None:
        """`value` when it is a field specifier call (its `default=` is the
        default, not the call), else None."""
        if (
            isinstance(value, ast.Call)
            and self.imports.resolve(value.func) in SPECIFIERS
        ):
            return value
        return None

    def _analyse_field(self, site: FieldSite, drop_converters: bool) -> None:
        field, keywords, call = site.node, site.keywords, site.call
        if is_class_var(site.annotation, self.imports):
            return
        if site.context is not None and site.name in site.context.fields:
            self.known_positions[field.target] = site.context.fields[site.name]
        static = "static" in keywords and is_name(keywords["static"].value, "True")
        kind = array_kind(site.annotation, self.imports)
        convert = keywords.get("convert")
        converter = keywords.get("converter")
        reading = FieldReading(
            kind=kind,
            static=static,
            opted_out=convert is not None and is_name(convert.value, "False"),
            # A converter that makes arrays already keeps new values traced.
            makes_array=converter is not None and self._makes_array(converter.value),
            migrating=site.cls.rpartition(".")[2] in self.migrating_classes,
        )
        found: dict[str, Diagnostic] = {}
        for rule in FIELD_RULES:
            diagnostic = rule.check_field(site, reading, found)
            if diagnostic is None:
                continue
            found[rule.CODE] = diagnostic
            self.diagnostics.append(diagnostic)
            if (
                diagnostic.fixable
                and self.fix
                and not self._suppressed(diagnostic.line, diagnostic.code)
            ):
                self.field_edits[field] = rule.FIX
                if call is not None:
                    self._release(call.func)
        if kind is None or static:
            return
        if self.typed and not (reading.opted_out or field in self.field_edits):
            # (the one edit planned so far is --fix's opt-out)
            self._wrap(site)
            if field.value is not None and call is None:
                self.wrap_defaults.add(field)
        if (
            call is None
            or converter is None
            or not drop_converters
            or field in self.field_edits
            or self.imports.resolve(call.func) != "equinox.field"
        ):
            return
        makes = CONVERTER_KINDS.get(self.imports.resolve(converter.value) or "")
        if makes is None:
            return
        mismatch = af004_converter_kind.check(site, converter, makes, kind)
        if mismatch is not None:
            self.diagnostics.append(mismatch)
            return
        self._release(converter.value)
        # A type checker types the __init__ parameter from the converter: the
        # annotation that says the same thing takes its place.
        self._wrap(site)
        if len(call.args) + len(call.keywords) == 1:
            self.field_edits[field] = FieldEdit.DROP_DEFAULT
            self._release(call.func)
        else:
            self.field_edits[field] = FieldEdit.DROP_CONVERTER

    def _wrap(self, site: FieldSite) -> None:
        if not is_field_wrapped(site.annotation, self.imports):
            self.wrap_annotations.add(site.node)

    def _makes_array(self, converter: Any) -> bool:
        """Whether a converter is `jnp.asarray` or a kin of it, possibly wrapped
        in `functools.partial` (to fix a dtype)."""
        if (
            isinstance(converter, ast.Call)
            and self.imports.resolve(converter.func) == "functools.partial"
            and converter.args
            # (a keyword never comes before a plain positional argument)
            and not isinstance(converter.args[0], ast.Starred)
        ):
            converter = converter.args[0]
        return self.imports.resolve(converter) in CONVERTER_KINDS
