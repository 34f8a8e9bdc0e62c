"""The codemod: equinox `Module` classes become `arrayfield.ArrayModule` classes.

A file goes through three steps. An analysis pass finds the Module classes,
plans the rewrites and collects diagnostics; a rewrite pass changes only the
planned nodes, so every other byte of the file survives; a last step adds
`import arrayfield as af` and drops the imports the rewrite left unused.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import cast

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from . import _diagnostics as diag
from ._annotations import (
    ArrayKind,
    array_kind,
    is_class_var,
    is_field_wrapped,
    looks_like_shape,
    scalar_annotation,
)
from ._diagnostics import Diagnostic
from ._imports import (
    ImportMap,
    add_import,
    can_bind,
    dotted_name,
    remove_unused_imports,
)

# Converters that make the array kind arrayfield makes for an annotation of
# that kind anyway: redundant under ArrayModule.
_CONVERTER_KINDS: dict[str, ArrayKind] = {
    "jax.numpy.asarray": "jax",
    "jax.numpy.array": "jax",
    "numpy.asarray": "numpy",
    "numpy.array": "numpy",
}
_FIELD_FUNCTIONS = frozenset({"equinox.field", "arrayfield.field"})
# Field specifiers whose call, as a field's value, is not the field's default.
_SPECIFIERS = _FIELD_FUNCTIONS | {"dataclasses.field"}
# Legacy annotations (functions, not types) and the type each stands for.
_LEGACY_ANNOTATIONS = frozenset({"numpy.array", "jax.numpy.array"})


@dataclasses.dataclass(frozen=True)
class MigrationResult:
    """The outcome of migrating one file.

    **Fields:**

    - `original`: the source text as read.
    - `code`: the migrated source text; equal to `original` when nothing changed.
    - `encoding`: the file's encoding, for writing `code` back as bytes.
    - `diagnostics`: the places that need a human decision, sorted by position.
    """

    original: str
    code: str
    encoding: str
    diagnostics: tuple[Diagnostic, ...]

    @property
    def changed(self) -> bool:
        return self.code != self.original


class _FieldEdit(enum.Enum):
    DROP_CONVERTER = enum.auto()  # eqx.field(converter=jnp.asarray, static=False)
    DROP_DEFAULT = enum.auto()  # = eqx.field(converter=jnp.asarray)


def _root_name(expr: cst.BaseExpression) -> str | None:
    dotted = dotted_name(expr)
    return None if dotted is None else dotted.split(".")[0]


def _is_true(expr: cst.BaseExpression | None, value: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == value


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


def _snippet(node: cst.CSTNode, limit: int = 40) -> str:
    text = " ".join(cst.Module(body=[]).code_for_node(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _SelfAssignments(cst.CSTVisitor):
    """`self.<attr> = value` statements in a method, nested classes excluded."""

    def __init__(self, self_name: str) -> None:
        self.self_name = self_name
        self.found: list[tuple[str, cst.BaseExpression, cst.CSTNode]] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def _record(
        self, target: cst.BaseExpression, value: cst.BaseExpression, node: cst.CSTNode
    ) -> None:
        if (
            isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value == self.self_name
        ):
            self.found.append((target.attr.value, value, node))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._record(target.target, node.value, node)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._record(node.target, node.value, node)


class _Analysis(cst.CSTVisitor):
    """Finds Module classes and plans what to rewrite; changes nothing."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, imports: ImportMap, typed: bool = False) -> None:
        super().__init__()
        self.imports = imports
        self.typed = typed
        self.module_classes: set[str] = set()
        self.base_edits: dict[cst.ClassDef, list[int]] = {}
        self.field_edits: dict[cst.AnnAssign, _FieldEdit] = {}
        # Annotations to wrap in `af.Field[...]`, and bare defaults to write as
        # `af.field(default=...)` (what a type checker needs for that spelling).
        self.wrap_annotations: set[cst.AnnAssign] = set()
        self.wrap_defaults: set[cst.AnnAssign] = set()
        # Names whose last use may have been rewritten away (`eqx`, `jnp`...).
        self.released_names: set[str] = set()
        self.diagnostics: list[Diagnostic] = []
        # Qualified name of each enclosing class, None for a function: classes
        # are named as arrayfield's runtime errors name them, `Scene.Config`,
        # with the part up to a function's `<locals>` left out.
        self._scopes: list[str | None] = []

    def _position(self, node: cst.CSTNode) -> tuple[int, int]:
        # Without a default, get_metadata raises KeyError rather than return one.
        position = cast(CodeRange, self.get_metadata(PositionProvider, node))
        start = position.start
        return start.line, start.column + 1

    def _report(self, node: cst.CSTNode, code: str, message: str) -> None:
        line, col = self._position(node)
        self.diagnostics.append(Diagnostic(line, col, code, message))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append(None)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._scopes.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        outer = self._scopes[-1] if self._scopes else None
        qualname = node.name.value if outer is None else f"{outer}.{node.name.value}"
        self._scopes.append(qualname)
        equinox_bases = [
            index
            for index, base in enumerate(node.bases)
            if self.imports.resolve(base.value) == "equinox.Module"
        ]
        already_migrated = any(
            self.imports.resolve(base.value) == "arrayfield.ArrayModule"
            or dotted_name(base.value) in self.module_classes
            for base in node.bases
        )
        if not (equinox_bases or already_migrated):
            return
        self.module_classes.add(node.name.value)
        if equinox_bases:
            self.base_edits[node] = equinox_bases
            for index in equinox_bases:
                self.released_names.add(_root_name(node.bases[index].value) or "")
        self._analyse_fields(node, qualname)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scopes.pop()

    def _analyse_fields(self, node: cst.ClassDef, qualname: str) -> None:
        statements = _class_statements(node)
        assignments: list[tuple[str, cst.BaseExpression, cst.CSTNode]] = []
        for statement in statements:
            if isinstance(statement, cst.FunctionDef) and statement.params.params:
                collector = _SelfAssignments(statement.params.params[0].name.value)
                statement.body.visit(collector)
                assignments.extend(collector.found)
        for statement in statements:
            if isinstance(statement, cst.AnnAssign) and isinstance(
                statement.target, cst.Name
            ):
                self._analyse_field(qualname, statement, assignments)

    def _analyse_field(
        self,
        cls: str,
        field: cst.AnnAssign,
        assignments: list[tuple[str, cst.BaseExpression, cst.CSTNode]],
    ) -> None:
        assert isinstance(field.target, cst.Name)
        name = field.target.value
        annotation = field.annotation.annotation
        if is_class_var(annotation, self.imports):
            return
        value = field.value
        call = None
        if isinstance(value, cst.Call):
            function = self.imports.resolve(value.func)
            if function in _FIELD_FUNCTIONS:
                call = value
        keywords = {
            arg.keyword.value: arg for arg in (call.args if call else ()) if arg.keyword
        }
        static = "static" in keywords and _is_true(keywords["static"].value, "True")

        kind = array_kind(annotation, self.imports)
        if kind is None:
            scalar = scalar_annotation(annotation, self.imports)
            converter = keywords.get("converter")
            # A converter that makes arrays already keeps new values traced.
            makes_array = converter is not None and self._makes_array(converter.value)
            if scalar is not None and not (static or makes_array):
                message = diag.scalar_field(cls, name, scalar)
                self._report(field.target, "AF001", message)
            return

        if static:
            self._report(field.target, "AF003", diag.static_array_field(cls, name))
            return
        convert = keywords.get("convert")
        opted_out = convert is not None and _is_true(convert.value, "False")
        if not opted_out:
            self._check_shape_like(cls, field, call, keywords, assignments)
        if self.typed and not opted_out:
            self._wrap(field)
            if field.value is not None and self._specifier(field.value) is None:
                self.wrap_defaults.add(field)
        if call is None or "converter" not in keywords:
            return
        if self.imports.resolve(call.func) != "equinox.field":
            return
        converter = keywords["converter"].value
        converter_kind = _CONVERTER_KINDS.get(self.imports.resolve(converter) or "")
        if converter_kind is None:
            return
        if converter_kind != kind:
            message = diag.converter_kind_mismatch(cls, name, _snippet(converter), kind)
            self._report(keywords["converter"], "AF004", message)
            return
        self.released_names.add(_root_name(converter) or "")
        # A type checker types the __init__ parameter from the converter: the
        # annotation that says the same thing takes its place.
        self._wrap(field)
        if len(call.args) == 1:
            self.field_edits[field] = _FieldEdit.DROP_DEFAULT
            self.released_names.add(_root_name(call.func) or "")
        else:
            self.field_edits[field] = _FieldEdit.DROP_CONVERTER

    def _wrap(self, field: cst.AnnAssign) -> None:
        if not is_field_wrapped(field.annotation.annotation, self.imports):
            self.wrap_annotations.add(field)

    def _specifier(self, value: cst.BaseExpression) -> str | None:
        if isinstance(value, cst.Call):
            function = self.imports.resolve(value.func)
            if function in _SPECIFIERS:
                return function
        return None

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
        return self.imports.resolve(converter) in _CONVERTER_KINDS

    def _check_shape_like(
        self,
        cls: str,
        field: cst.AnnAssign,
        call: cst.Call | None,
        keywords: dict[str, cst.Arg],
        assignments: list[tuple[str, cst.BaseExpression, cst.CSTNode]],
    ) -> None:
        assert isinstance(field.target, cst.Name)
        name = field.target.value
        if call is None:
            default = field.value
        else:
            default = keywords["default"].value if "default" in keywords else None
        evidence = [(default, field)] if default is not None else []
        evidence += [(value, node) for attr, value, node in assignments if attr == name]
        for value, node in evidence:
            if looks_like_shape(value):
                line = None if node is field else self._position(node)[0]
                message = diag.shape_like_field(cls, name, _snippet(value), line)
                self._report(field.target, "AF002", message)
                return


def _without_arg(call: cst.Call, index: int) -> cst.Call:
    args = list(call.args)
    removed = args.pop(index)
    if index == len(args):
        args[-1] = args[-1].with_changes(comma=removed.comma)
    return call.with_changes(args=args)


class _Rewriter(cst.CSTTransformer):
    """Applies an `_Analysis` plan; every node it was not told about is kept."""

    def __init__(self, analysis: _Analysis, names: dict[str, str]) -> None:
        super().__init__()
        self.analysis = analysis
        self.array_module = cst.parse_expression(names["ArrayModule"])
        self.field_type = cst.parse_expression(names["Field"])
        self.field_function = cst.parse_expression(names["field"])

    def leave_ClassDef(
        self, original_node: cst.ClassDef, updated_node: cst.ClassDef
    ) -> cst.ClassDef:
        indices = self.analysis.base_edits.get(original_node)
        if not indices:
            return updated_node
        bases = list(updated_node.bases)
        for index in indices:
            bases[index] = bases[index].with_changes(value=self.array_module)
        return updated_node.with_changes(bases=bases)

    def leave_AnnAssign(
        self, original_node: cst.AnnAssign, updated_node: cst.AnnAssign
    ) -> cst.AnnAssign:
        edit = self.analysis.field_edits.get(original_node)
        if edit is _FieldEdit.DROP_DEFAULT:
            updated_node = updated_node.with_changes(
                value=None, equal=cst.MaybeSentinel.DEFAULT
            )
        elif edit is _FieldEdit.DROP_CONVERTER:
            call = updated_node.value
            assert isinstance(call, cst.Call)
            index = next(
                i
                for i, arg in enumerate(call.args)
                if arg.keyword is not None and arg.keyword.value == "converter"
            )
            updated_node = updated_node.with_changes(value=_without_arg(call, index))
        if original_node in self.analysis.wrap_annotations:
            annotation = updated_node.annotation
            inner = self._legacy_to_type(annotation.annotation)
            wrapped = cst.Subscript(
                value=self.field_type,
                slice=[cst.SubscriptElement(slice=cst.Index(value=inner))],
            )
            updated_node = updated_node.with_changes(
                annotation=annotation.with_changes(annotation=wrapped)
            )
        if original_node in self.analysis.wrap_defaults and updated_node.value:
            default = cst.Arg(
                keyword=cst.Name("default"),
                value=updated_node.value,
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""),
                    whitespace_after=cst.SimpleWhitespace(""),
                ),
            )
            updated_node = updated_node.with_changes(
                value=cst.Call(func=self.field_function, args=[default])
            )
        return updated_node

    def _legacy_to_type(self, annotation: cst.BaseExpression) -> cst.BaseExpression:
        """`np.array` -> `np.ndarray`: a function is no type to a checker."""
        if (
            isinstance(annotation, cst.Attribute)
            and self.analysis.imports.resolve(annotation) in _LEGACY_ANNOTATIONS
        ):
            return annotation.with_changes(attr=cst.Name("ndarray"))
        return annotation


def _arrayfield_names(
    wrapper: MetadataWrapper, imports: ImportMap, needed: list[str]
) -> tuple[dict[str, str], str | None]:
    """Source text naming arrayfield's `needed` names, and the import to add."""
    names = {
        name: imports.local_name_for(f"arrayfield.{name}")
        for name in ("ArrayModule", "Field", "field")
    }
    if all(names[name] is not None for name in needed):
        return {k: v or f"arrayfield.{k}" for k, v in names.items()}, None
    module, new_import = "arrayfield", "import arrayfield"
    if can_bind(wrapper, "af", "arrayfield"):
        module, new_import = "af", "import arrayfield as af"
    return {k: v or f"{module}.{k}" for k, v in names.items()}, new_import


def migrate_module(
    module: cst.Module, *, typed: bool = False
) -> tuple[cst.Module, list[Diagnostic]]:
    """Migrate a parsed module; see `migrate_source`."""
    imports = ImportMap.from_module(module)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    analysis = _Analysis(imports, typed=typed)
    wrapper.visit(analysis)
    diagnostics = sorted(analysis.diagnostics)
    needed = [
        name
        for name, edits in (
            ("ArrayModule", analysis.base_edits),
            ("Field", analysis.wrap_annotations),
            ("field", analysis.wrap_defaults),
        )
        if edits
    ]
    if not (needed or analysis.field_edits):
        return module, diagnostics

    names, new_import = _arrayfield_names(wrapper, imports, needed)
    rewriter = _Rewriter(analysis, names)
    migrated = wrapper.visit(rewriter)
    if new_import is not None:
        migrated = add_import(migrated, new_import, next_to="equinox")
    migrated = remove_unused_imports(migrated, analysis.released_names)
    return migrated, diagnostics


def migrate_source(source: str | bytes, *, typed: bool = False) -> MigrationResult:
    """Rewrite the equinox Module classes of one file to use arrayfield.

    **Arguments:**

    - `source`: the file's contents. Bytes are decoded the way Python would
        (PEP 263 coding line, else UTF-8) and `MigrationResult.encoding` says how.
    - `typed`: also wrap every converted array field's annotation in
        `af.Field[...]` and write its bare default as `af.field(default=...)`,
        so that type checkers accept the numbers arrayfield converts.

    **Returns:**

    A `MigrationResult`. Its `code` is `original` plus the rewrites: classes
    whose base is equinox's `Module` (any spelling) now subclass
    `af.ArrayModule`; `eqx.field(converter=jnp.asarray)` on array-annotated
    fields is dropped and the annotation wrapped in `af.Field[...]` (a type
    checker read the converter's parameter type; `af.Field` says the same);
    `import arrayfield as af` is added and imports that only the rewritten code
    used are removed.

    **Raises:**

    `libcst.ParserSyntaxError` if the source does not parse.
    """
    module = cst.parse_module(source)
    migrated, diagnostics = migrate_module(module, typed=typed)
    return MigrationResult(
        original=module.code,
        code=migrated.code,
        encoding=module.encoding,
        diagnostics=tuple(diagnostics),
    )
