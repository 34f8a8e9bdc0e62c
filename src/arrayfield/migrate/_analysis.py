"""The analysis pass: find the Module classes of a file and plan the rewrite.

`Analysis` walks a parsed file once. For each class deriving equinox's Module
(directly, through an alias, or through a base the project index found in
another file) it plans the edits (`base_edits`, `field_edits`...) and runs the
checks of `_checks` on every field. It changes nothing: `_rewrite` applies the
plan.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from . import _diagnostics as diag
from ._annotations import ArrayKind, array_kind, is_class_var, is_field_wrapped
from ._checks import (
    af001_scalar_field,
    af002_shape_field,
    af003_static_array,
    af004_converter_kind,
    af005_per_instance,
    af006_class_per_call,
    af007_trainable_constant,
)
from ._diagnostics import Diagnostic
from ._imports import ImportMap
from ._index import ClassContext, FileContext
from ._names import dotted_name
from ._site import Assignment, FieldSite, is_name
from ._statements import small_statements, walk_definitions

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


class FieldEdit(enum.Enum):
    DROP_CONVERTER = enum.auto()  # eqx.field(converter=jnp.asarray, static=False)
    DROP_DEFAULT = enum.auto()  # = eqx.field(converter=jnp.asarray)
    NO_CONVERT = enum.auto()  # --fix: `= af.field(convert=False)` on a shape field


def root_name(expr: cst.BaseExpression) -> str | None:
    """`eqx` for `eqx.field`: the name an import binds."""
    dotted = dotted_name(expr)
    return None if dotted is None else dotted.split(".")[0]


def _unsubscripted(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`Parent` for the base `Parent[int]` of a generic class."""
    return expr.value if isinstance(expr, cst.Subscript) else expr


def _class_statements(node: cst.ClassDef) -> list[cst.CSTNode]:
    """The statements of a class body, single-line bodies included."""
    body = node.body
    if isinstance(body, cst.SimpleStatementSuite):
        return list(body.body)
    statements: list[cst.CSTNode] = []
    for statement in body.body:
        if isinstance(statement, cst.SimpleStatementLine):
            statements.extend(statement.body)
        else:
            statements.append(statement)
    return statements


def _method_statements(body: cst.BaseSuite) -> Iterable[cst.BaseSmallStatement]:
    """The simple statements of a method, those of nested classes left out."""
    if isinstance(body, cst.SimpleStatementSuite):
        yield from body.body
        return
    for statement in body.body:
        if not isinstance(statement, cst.ClassDef):
            yield from small_statements([statement])


def _self_assignments(method: cst.FunctionDef) -> list[Assignment]:
    """`self.<attr> = value` statements in a method, nested classes excluded."""
    self_name = method.params.params[0].name.value
    found: list[Assignment] = []

    def record(
        target: cst.BaseExpression, value: cst.BaseExpression, node: cst.CSTNode
    ) -> None:
        if (
            isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value == self_name
        ):
            found.append((target.attr.value, value, node))

    for small in _method_statements(method.body):
        if isinstance(small, cst.Assign):
            for target in small.targets:
                record(target.target, small.value, small)
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            record(small.target, small.value, small)
    return found


class Analysis(cst.CSTVisitor):
    """Finds Module classes and plans what to rewrite; changes nothing."""

    def __init__(
        self,
        wrapper: MetadataWrapper | None,
        imports: ImportMap,
        context: FileContext | None,
        fix: bool,
        typed: bool,
        source: str | None = None,
    ) -> None:
        super().__init__()
        self.wrapper = wrapper
        # The source text, for noqa comments (read only when --fix edits).
        self.source = source
        self._lines: list[str] | None = None
        # Field positions the project index read with `ast`: computing libcst's
        # positions costs a code generation pass over the whole file.
        self.known_positions: dict[cst.CSTNode, tuple[int, int]] = {}
        self._positions: Mapping[cst.CSTNode, CodeRange] | None = None
        self.imports = imports
        self.context = context
        self.fix = fix
        self.typed = typed
        self.module_classes: set[str] = set()
        # Module classes that derive from equinox's Module, not af.ArrayModule:
        # the rewrite changes what their fields hold.
        self.migrating_classes: set[str] = set()
        self.base_edits: dict[cst.ClassDef, list[int]] = {}
        self.field_edits: dict[cst.AnnAssign, FieldEdit] = {}
        # Annotations to wrap in `af.Field[...]`, and bare defaults to write as
        # `af.field(default=...)` (what a type checker needs for that spelling).
        self.wrap_annotations: set[cst.AnnAssign] = set()
        self.wrap_defaults: set[cst.AnnAssign] = set()
        # `Base = eqx.Module` and the base in `type(name, (eqx.Module,), ns)`:
        # expressions that become a reference to ArrayModule.
        self.expression_edits: set[cst.BaseExpression] = set()
        # Module-level names bound to equinox's Module by an assignment.
        self.module_aliases: set[str] = set()
        # Names whose last use may have been rewritten away (`eqx`, `jnp`...).
        self.released_names: set[str] = set()
        self.diagnostics: list[Diagnostic] = []
        # Qualified name of each enclosing class, None for a function: classes
        # are named as arrayfield's runtime errors name them, `Scene.Config`,
        # with the part up to a function's `<locals>` left out.
        self._scopes: list[str | None] = []
        # Per enclosing function: whether it is functools.cache'd.
        self._cached: list[bool] = []

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        """Line and column (1-based) of `node`."""
        known = self.known_positions.get(node)
        if known is not None:
            return known
        if self.wrapper is None:
            raise LookupError("no position for a node outside the outline")
        if self._positions is None:
            self._positions = self.wrapper.resolve(PositionProvider)
        start = self._positions[node].start
        return start.line, start.column + 1

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

    def walk_statements(self, module: cst.Module) -> None:
        """What `module.visit(self)` does for a file without `type(...)` calls:
        the classes and functions are found by walking statements only, several
        times faster than a libcst visit, which rebuilds every node it passes."""
        self.visit_Module(module)
        walk_definitions(module.body, self._enter, self._leave)

    def _enter(self, node: cst.ClassDef | cst.FunctionDef) -> None:
        if isinstance(node, cst.ClassDef):
            self.visit_ClassDef(node)
        else:
            self.visit_FunctionDef(node)

    def _leave(self, node: cst.ClassDef | cst.FunctionDef) -> None:
        if isinstance(node, cst.ClassDef):
            self.leave_ClassDef(node)
        else:
            self.leave_FunctionDef(node)

    def _is_equinox_module(self, expr: cst.BaseExpression) -> bool:
        if self.imports.resolve(expr) == "equinox.Module":
            return True
        # `from .core import Module` where core imports it from equinox.
        return (
            self.context is not None and dotted_name(expr) in self.context.equinox_bases
        )

    def visit_Module(self, node: cst.Module) -> None:
        for statement in node.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if (
                    isinstance(small, cst.Assign)
                    and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)
                    and self._is_equinox_module(small.value)
                ):
                    self.module_aliases.add(small.targets[0].target.value)
                    self.expression_edits.add(small.value)
                    self.released_names.add(root_name(small.value) or "")

    def visit_Call(self, node: cst.Call) -> None:
        # type(name, (eqx.Module, ...), namespace): a class made at run time.
        if not (
            isinstance(node.func, cst.Name)
            and node.func.value == "type"
            and len(node.args) == 3
            and isinstance(node.args[1].value, cst.Tuple)
        ):
            return
        bases = [element.value for element in node.args[1].value.elements]
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
            self._add(af006_class_per_call.check(node, self.position(node)))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append(None)
        self._cached.append(any(map(af006_class_per_call.is_cache, node.decorators)))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._scopes.pop()
        self._cached.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        outer = self._scopes[-1] if self._scopes else None
        qualname = node.name.value if outer is None else f"{outer}.{node.name.value}"
        self._scopes.append(qualname)
        equinox_bases = [
            index
            for index, base in enumerate(node.bases)
            if self._is_equinox_module(base.value)
        ]
        written = [_unsubscripted(base.value) for base in node.bases]
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
        self.module_classes.add(node.name.value)
        context = self._class_context(qualname)
        if (
            equinox_bases
            or any(
                dotted_name(base) in self.module_aliases | self.migrating_classes
                for base in written
            )
            or (context is not None and context.from_equinox)
        ):
            self.migrating_classes.add(node.name.value)
        if equinox_bases:
            self.base_edits[node] = equinox_bases
            for index in equinox_bases:
                self.released_names.add(root_name(node.bases[index].value) or "")
        self._analyse_fields(
            node, qualname, drop_converters=bool(equinox_bases or already_migrated)
        )

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scopes.pop()

    def _analyse_fields(
        self, node: cst.ClassDef, qualname: str, *, drop_converters: bool
    ) -> None:
        statements = _class_statements(node)
        assignments: list[Assignment] = []
        for statement in statements:
            if isinstance(statement, cst.FunctionDef) and statement.params.params:
                assignments.extend(_self_assignments(statement))
        context = self._class_context(qualname)
        for statement in statements:
            if isinstance(statement, cst.AnnAssign) and isinstance(
                statement.target, cst.Name
            ):
                value = statement.value
                # dataclasses.field too: its `default=` is the default, not the call.
                call = value if isinstance(value, cst.Call) else None
                if call is not None and not self._is_specifier(call):
                    call = None
                keywords = {
                    arg.keyword.value: arg
                    for arg in (call.args if call else ())
                    if arg.keyword
                }
                site = FieldSite(
                    qualname,
                    statement,
                    call,
                    keywords,
                    assignments,
                    context,
                    self.context,
                    self.imports,
                    self.position,
                )
                self._analyse_field(site, drop_converters)

    def _class_context(self, cls: str) -> ClassContext | None:
        return None if self.context is None else self.context.classes.get(cls)

    def _analyse_field(self, site: FieldSite, drop_converters: bool) -> None:
        field, keywords, call = site.node, site.keywords, site.call
        if is_class_var(site.annotation, self.imports):
            return
        if site.context is not None and site.name in site.context.fields:
            self.known_positions[field.target] = site.context.fields[site.name]
        static = "static" in keywords and is_name(keywords["static"].value, "True")

        kind = array_kind(site.annotation, self.imports)
        if kind is None:
            converter = keywords.get("converter")
            # A converter that makes arrays already keeps new values traced.
            makes_array = converter is not None and self._makes_array(converter.value)
            if not (static or makes_array):
                self._add(af001_scalar_field.check(site))
                self._add(af005_per_instance.check(site))
            return

        if static:
            self._add(af003_static_array.check(site))
            return
        convert = keywords.get("convert")
        opted_out = convert is not None and is_name(convert.value, "False")
        if not opted_out:
            found = af002_shape_field.check(site)
            self._add(found)
            if found is None and site.cls.rpartition(".")[2] in self.migrating_classes:
                self._add(af007_trainable_constant.check(site))
            if (
                found is not None
                and found.fixable
                and self.fix
                and not self._suppressed(found.line, found.code)
            ):
                self.field_edits[field] = FieldEdit.NO_CONVERT
                if call is not None:
                    self.released_names.add(root_name(call.func) or "")
        if self.typed and not (opted_out or field in self.field_edits):
            # (the one edit planned so far is --fix's opt-out)
            self._wrap(field)
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
        self._wrap(field)
        if len(call.args) == 1:
            self.field_edits[field] = FieldEdit.DROP_DEFAULT
            self.released_names.add(root_name(call.func) or "")
        else:
            self.field_edits[field] = FieldEdit.DROP_CONVERTER

    def _wrap(self, field: cst.AnnAssign) -> None:
        if not is_field_wrapped(field.annotation.annotation, self.imports):
            self.wrap_annotations.add(field)

    def _is_specifier(self, value: cst.BaseExpression) -> bool:
        return (
            isinstance(value, cst.Call)
            and self.imports.resolve(value.func) in SPECIFIERS
        )

    def _makes_array(self, converter: cst.BaseExpression) -> bool:
        """Whether a converter is `jnp.asarray` or a kin of it, possibly wrapped
        in `functools.partial` (to fix a dtype)."""
        if (
            isinstance(converter, cst.Call)
            and self.imports.resolve(converter.func) == "functools.partial"
            and converter.args
            and converter.args[0].keyword is None
            and not converter.args[0].star
        ):
            converter = converter.args[0].value
        return self.imports.resolve(converter) in CONVERTER_KINDS
