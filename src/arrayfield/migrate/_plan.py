"""The plan of a file's migration, whichever parser read the file.

`Plan` holds what the analysis of one file decides: which classes are Module
classes, which edits the rewrite makes (`base_edits`, `field_edits`...) and the
diagnostics, from running the checks of `_checks` on every field. Two front
ends drive it: `_analysis` walks a libcst tree (when the file may be rewritten)
and `_check_ast` an `ast` tree (when `arrayfield migrate` only needs to know
whether the file changes, and its diagnostics). Every decision is taken here,
over nodes read through `_syntax`, so both reach the same verdict; a front end
only finds the classes, functions, fields and `self.<attr> = ...` statements,
and says where a node is and what its source text is.
"""

from __future__ import annotations

from typing import Any

from . import _diagnostics as diag
from . import _syntax as syntax
from ._annotations import ArrayKind, array_kind, is_class_var, is_field_wrapped
from ._bindings import ImportMap
from ._checks import (
    FIELD_RULES,
    af004_converter_kind,
    af006_class_per_call,
    af008_axis_spec,
)
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


def root_name(expr: Any) -> str | None:
    """`eqx` for `eqx.field`: the name an import binds."""
    dotted = dotted_name(expr)
    return None if dotted is None else dotted.split(".")[0]


def _unsubscripted(expr: Any) -> Any:
    """`Parent` for the base `Parent[int]` of a generic class."""
    return expr.value if syntax.is_subscript(expr) else expr


def calls_matter(source: str | bytes) -> bool:
    """Whether a file may hold a call `Plan.call` reads (a `type(...)`, an axis
    keyword): the front ends visit every call only then, which most files skip."""
    if isinstance(source, bytes):
        return b"type(" in source or b"_axes" in source
    return "type(" in source or "_axes" in source


class Plan:
    """What to rewrite in one file, and its diagnostics; changes nothing.

    A front end calls `module_assignment` for each module-level `name = value`,
    `enter_function`/`leave_function` and `enter_class`/`leave_class` around
    every definition (outer ones first), and `call` for each call of
    `type` with three arguments; it implements `position`, `snippet` and
    `field_sites`.
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

    # What a front end provides.

    def position(self, node: Any) -> tuple[int, int]:
        """Line and column (1-based) of `node`."""
        raise NotImplementedError

    def snippet(self, node: Any) -> str:
        """The node's source on one line, cut to 40 characters (`_site.shorten`)."""
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

    def _suppressed(self, line: int, code: str) -> bool:
        """Whether `# noqa` on `line` silences `code`: a silenced fix is not made."""
        if self.source is None:
            return False
        if self._lines is None:
            self._lines = diag.source_lines(self.source)
        return diag.suppressed(self._lines, line, code)

    def _add(self, diagnostic: Diagnostic | None) -> None:
        if diagnostic is not None:
            self.diagnostics.append(diagnostic)

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
        self.released_names.add(root_name(value) or "")

    def call(self, node: Any) -> None:
        """A call: one that makes a class (`_type_call`) or takes axis specs
        (`_axis_specs`)."""
        self._type_call(node)
        self._axis_specs(node)

    def _axis_specs(self, node: Any) -> None:
        """`jax.vmap(f, in_axes=Pwc(None, 0))`: a Module class this codemod
        migrates, built as an axis spec (AF008)."""
        keywords = syntax.call_keywords(node)
        for keyword in af008_axis_spec.AXIS_KEYWORDS:
            argument = keywords.get(keyword)
            if argument is None:
                continue
            for spec in af008_axis_spec.calls_in(syntax.argument_value(argument)):
                name = dotted_name(spec.func)
                if name is None:
                    continue
                migrated = name in self.module_classes or (
                    self.context is not None and name in self.context.bases
                )
                if migrated and af008_axis_spec.gives_an_axis(spec):
                    position = self.position(spec)
                    self._add(af008_axis_spec.check(name, keyword, position))

    def _type_call(self, node: Any) -> None:
        """`type(name, (eqx.Module, ...), namespace)` makes a class at run time."""
        arguments = syntax.call_arguments(node)
        if syntax.identifier(node.func) != "type" or len(arguments) != 3:
            return
        bases_tuple = syntax.argument_value(arguments[1])
        if type(bases_tuple).__name__ != "Tuple":
            return
        bases = [value for _, value in syntax.display_elements(bases_tuple) or []]
        direct = [base for base in bases if self._is_equinox_module(base)]
        for base in direct:
            self.expression_edits.add(base)
            self.released_names.add(root_name(base) or "")
        names = [dotted_name(_unsubscripted(base)) for base in bases]
        derived = direct or any(
            name in self.module_aliases
            or name in self.module_classes
            or (self.context is not None and name in self.context.bases)
            for name in names
        )
        if derived and self._cached and not self._cached[-1]:
            name = self.snippet(syntax.argument_value(arguments[0]))
            self._add(af006_class_per_call.check(name, self.position(node)))

    def enter_function(self, decorators: list[Any]) -> None:
        """A function statement, by its decorators' expressions."""
        self._scopes.append(None)
        self._cached.append(any(map(af006_class_per_call.is_cache, decorators)))

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
        already_migrated = any(
            self.imports.resolve(base) == "arrayfield.ArrayModule"
            or dotted_name(base) in self.module_classes
            for base in written
        )
        # Known from the project index: a subclass of a Module class defined in
        # another module, or of an alias such as `Base = eqx.Module`.
        elsewhere = any(
            dotted_name(base) in self.module_aliases for base in written
        ) or (self.context is not None and qualname in self.context.classes)
        if not (equinox_bases or already_migrated or elsewhere):
            return
        self.module_classes.add(name)
        context = self._class_context(qualname)
        if (
            equinox_bases
            or any(
                dotted_name(base) in self.module_aliases | self.migrating_classes
                for base in written
            )
            or (context is not None and context.from_equinox)
        ):
            self.migrating_classes.add(name)
        if equinox_bases:
            self.base_edits[node] = equinox_bases
            for index in equinox_bases:
                self.released_names.add(root_name(bases[index]) or "")
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
        return value if value is not None and self._is_specifier(value) else None

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
            self._add(diagnostic)
            if (
                diagnostic.fixable
                and self.fix
                and not self._suppressed(diagnostic.line, diagnostic.code)
            ):
                self.field_edits[field] = rule.FIX
                if call is not None:
                    self.released_names.add(root_name(call.func) or "")
        if kind is None or static:
            return
        opted_out = reading.opted_out
        if self.typed and not (opted_out or field in self.field_edits):
            # (the one edit planned so far is --fix's opt-out)
            self._wrap(site)
            if field.value is not None and not self._is_specifier(field.value):
                self.wrap_defaults.add(field)
        if (
            call is None
            or "converter" not in keywords
            or not drop_converters
            or field in self.field_edits
        ):
            return
        if self.imports.resolve(call.func) != "equinox.field":
            return
        converter = keywords["converter"].value
        makes = CONVERTER_KINDS.get(self.imports.resolve(converter) or "")
        if makes is None:
            return
        mismatch = af004_converter_kind.check(site, keywords["converter"], makes, kind)
        if mismatch is not None:
            self._add(mismatch)
            return
        self.released_names.add(root_name(converter) or "")
        # A type checker types the __init__ parameter from the converter: the
        # annotation that says the same thing takes its place.
        self._wrap(site)
        if len(syntax.call_arguments(call)) == 1:
            self.field_edits[field] = FieldEdit.DROP_DEFAULT
            self.released_names.add(root_name(call.func) or "")
        else:
            self.field_edits[field] = FieldEdit.DROP_CONVERTER

    def _wrap(self, site: FieldSite) -> None:
        if not is_field_wrapped(site.annotation, self.imports):
            self.wrap_annotations.add(site.node)

    def _is_specifier(self, value: Any) -> bool:
        return syntax.is_call(value) and self.imports.resolve(value.func) in SPECIFIERS

    def _makes_array(self, converter: Any) -> bool:
        """Whether a converter is `jnp.asarray` or a kin of it, possibly wrapped
        in `functools.partial` (to fix a dtype)."""
        if (
            syntax.is_call(converter)
            and self.imports.resolve(converter.func) == "functools.partial"
        ):
            arguments = syntax.call_arguments(converter)
            if arguments and syntax.is_plain_positional(arguments[0]):
                converter = syntax.argument_value(arguments[0])
        return self.imports.resolve(converter) in CONVERTER_KINDS
