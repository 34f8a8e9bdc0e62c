"""The codemod: equinox `Module` classes become `arrayfield.ArrayModule` classes.

A file goes through three steps. An analysis pass finds the Module classes,
plans the rewrites and collects diagnostics; a rewrite pass changes only the
planned nodes, so every other byte of the file survives; a last step adds
`import arrayfield as af` and drops the imports the rewrite left unused. What
the project index (`_index`) knows about the file, its Module classes whose
bases live elsewhere and how the whole tree uses their fields, comes in as a
`FileContext`.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping, Sequence

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
from ._facts import CONTROL, LAMBDA, OBJECT, PARAM, PARTIAL, SHAPE, STRING
from ._imports import ImportMap, add_import, can_bind, remove_unused_imports
from ._index import ClassContext, FileContext
from ._names import dotted_name
from ._statements import small_statements, walk_definitions

# Converters that make the array kind arrayfield makes for an annotation of
# that kind anyway: redundant under ArrayModule.
_CONVERTER_KINDS: dict[str, ArrayKind] = {
    "jax.numpy.asarray": "jax",
    "jax.numpy.array": "jax",
    "numpy.asarray": "numpy",
    "numpy.array": "numpy",
}
# Field specifiers: their call, as a field's value, is not the field's default.
_SPECIFIERS = frozenset({"equinox.field", "arrayfield.field", "dataclasses.field"})
# Legacy annotations: functions, not types; `ndarray` is the type each stands for.
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
    NO_CONVERT = enum.auto()  # --fix: `= af.field(convert=False)` on a shape field


# Kinds of per-instance values, in the order they are reported.
_PER_INSTANCE = (LAMBDA, PARTIAL, OBJECT, STRING)


def _root_name(expr: cst.BaseExpression) -> str | None:
    dotted = dotted_name(expr)
    return None if dotted is None else dotted.split(".")[0]


def _unsubscripted(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`Parent` for the base `Parent[int]` of a generic class."""
    return expr.value if isinstance(expr, cst.Subscript) else expr


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


def _method_statements(body: cst.BaseSuite) -> Iterable[cst.BaseSmallStatement]:
    """The simple statements of a method, those of nested classes left out."""
    if isinstance(body, cst.SimpleStatementSuite):
        yield from body.body
        return
    for statement in body.body:
        if not isinstance(statement, cst.ClassDef):
            yield from small_statements([statement])


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

    def __init__(
        self,
        wrapper: MetadataWrapper,
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
        self.base_edits: dict[cst.ClassDef, list[int]] = {}
        self.field_edits: dict[cst.AnnAssign, _FieldEdit] = {}
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

    def _position(self, node: cst.CSTNode) -> tuple[int, int]:
        known = self.known_positions.get(node)
        if known is not None:
            return known
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

    def _report(self, node: cst.CSTNode, code: str, message: str) -> None:
        line, col = self._position(node)
        self.diagnostics.append(Diagnostic(line, col, code, message))

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
                    self.released_names.add(_root_name(small.value) or "")

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
            self.released_names.add(_root_name(base) or "")
        names = [dotted_name(_unsubscripted(base)) for base in bases]
        derived = direct or any(
            name in self.module_aliases
            or name in self.module_classes
            or (self.context is not None and name in self.context.bases)
            for name in names
        )
        if derived and self._cached and not self._cached[-1]:
            self._report(
                node, "AF006", diag.class_per_call(_snippet(node.args[0].value))
            )

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append(None)
        self._cached.append(any(map(_is_cache, node.decorators)))

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
        if equinox_bases:
            self.base_edits[node] = equinox_bases
            for index in equinox_bases:
                self.released_names.add(_root_name(node.bases[index].value) or "")
        self._analyse_fields(
            node, qualname, drop_converters=bool(equinox_bases or already_migrated)
        )

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scopes.pop()

    def _analyse_fields(
        self, node: cst.ClassDef, qualname: str, *, drop_converters: bool
    ) -> None:
        statements = _class_statements(node)
        assignments: list[tuple[str, cst.BaseExpression, cst.CSTNode]] = []
        for statement in statements:
            if isinstance(statement, cst.FunctionDef) and statement.params.params:
                collector = _SelfAssignments(statement.params.params[0].name.value)
                for small in _method_statements(statement.body):
                    if isinstance(small, cst.Assign):
                        collector.visit_Assign(small)
                    elif isinstance(small, cst.AnnAssign):
                        collector.visit_AnnAssign(small)
                assignments.extend(collector.found)
        for statement in statements:
            if isinstance(statement, cst.AnnAssign) and isinstance(
                statement.target, cst.Name
            ):
                self._analyse_field(qualname, statement, assignments, drop_converters)

    def _class_context(self, cls: str) -> ClassContext | None:
        return None if self.context is None else self.context.classes.get(cls)

    def _analyse_field(
        self,
        cls: str,
        field: cst.AnnAssign,
        assignments: list[tuple[str, cst.BaseExpression, cst.CSTNode]],
        drop_converters: bool,
    ) -> None:
        assert isinstance(field.target, cst.Name)
        name = field.target.value
        annotation = field.annotation.annotation
        if is_class_var(annotation, self.imports):
            return
        context = self._class_context(cls)
        if context is not None and name in context.fields:
            self.known_positions[field.target] = context.fields[name]
        value = field.value
        # dataclasses.field too: its `default=` is the default, not the call.
        call = None
        if isinstance(value, cst.Call) and self._is_specifier(value):
            call = value
        keywords = {
            arg.keyword.value: arg for arg in (call.args if call else ()) if arg.keyword
        }
        static = "static" in keywords and _is_true(keywords["static"].value, "True")

        kind = array_kind(annotation, self.imports)
        if kind is None:
            converter = keywords.get("converter")
            # A converter that makes arrays already keeps new values traced.
            makes_array = converter is not None and self._makes_array(converter.value)
            if not (static or makes_array):
                self._check_scalar(cls, field, context)
                self._check_per_instance(cls, field, context)
            return

        if static:
            self._report(field.target, "AF003", diag.static_array_field(cls, name))
            return
        convert = keywords.get("convert")
        opted_out = convert is not None and _is_true(convert.value, "False")
        if not opted_out:
            self._check_shape_like(cls, field, call, keywords, assignments, context)
        if self.typed and not (opted_out or field in self.field_edits):
            # (the one edit `_check_shape_like` plans is --fix's opt-out)
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

    def _is_specifier(self, value: cst.BaseExpression) -> bool:
        return (
            isinstance(value, cst.Call)
            and self.imports.resolve(value.func) in _SPECIFIERS
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
        return self.imports.resolve(converter) in _CONVERTER_KINDS

    def _check_scalar(
        self, cls: str, field: cst.AnnAssign, context: ClassContext | None
    ) -> None:
        """AF001: a Python number that changes between calls recompiles."""
        assert isinstance(field.target, cst.Name)
        name = field.target.value
        annotation = field.annotation.annotation
        scalar = scalar_annotation(annotation, self.imports, ("int",))
        if scalar is None:
            return
        uses = context.uses.get(name, {}) if context is not None else {}
        if SHAPE in uses or CONTROL in uses:
            return  # a size or a flag: it must stay a Python number
        evidence = ""
        replaced = self.context.tree_at.get(name) if self.context else None
        assigned = context.assigns.get(name, {}).get(PARAM) if context else None
        if replaced is not None:
            evidence = f"it is replaced with eqx.tree_at at {replaced}"
        elif assigned is not None:
            evidence = f"it is set from an `__init__` argument at {assigned}"
        elif context is not None and context.init_from_args:
            evidence = "it is set from a constructor argument"
        if scalar == "int" and replaced is None:
            return  # ints are mostly sizes, counts and ids
        message = diag.scalar_field(cls, name, scalar, evidence)
        self._report(field.target, "AF001", message)

    def _check_per_instance(
        self, cls: str, field: cst.AnnAssign, context: ClassContext | None
    ) -> None:
        """AF005: a static leaf made per instance compiles per instance."""
        if context is None:
            return
        assert isinstance(field.target, cst.Name)
        name = field.target.value
        assigns = context.assigns.get(name, {})
        for kind in _PER_INSTANCE:
            if kind in assigns:
                what = context.objects.get(name, "")
                message = diag.per_instance_field(cls, name, kind, assigns[kind], what)
                self._report(field.target, "AF005", message)
                return
        annotation = field.annotation.annotation
        if self.context is not None and dotted_name(annotation) in (
            self.context.plain_classes
        ):
            where = assigns.get(PARAM, "a constructor argument")
            message = diag.per_instance_field(
                cls, name, OBJECT, where, dotted_name(annotation) or ""
            )
            self._report(field.target, "AF005", message)
            return
        is_str = scalar_annotation(annotation, self.imports, ("str",))
        if is_str != "str":
            return
        if PARAM in assigns:
            where = assigns[PARAM]
        elif context.init_from_args and field.value is None:
            where = "a constructor argument"
        else:
            return
        message = diag.per_instance_field(cls, name, STRING, where, "")
        self._report(field.target, "AF005", message)

    def _check_shape_like(
        self,
        cls: str,
        field: cst.AnnAssign,
        call: cst.Call | None,
        keywords: dict[str, cst.Arg],
        assignments: list[tuple[str, cst.BaseExpression, cst.CSTNode]],
        context: ClassContext | None,
    ) -> None:
        assert isinstance(field.target, cst.Name)
        name = field.target.value
        uses = context.uses.get(name, {}) if context is not None else {}
        for kind, use in ((SHAPE, "a shape or size"), (CONTROL, "a Python condition")):
            if kind in uses:
                message = diag.shape_used_field(cls, name, use, uses[kind])
                line, col = self._position(field.target)
                self.diagnostics.append(
                    Diagnostic(line, col, "AF002", message, fixable=True)
                )
                if self.fix and not self._suppressed(line, "AF002"):
                    self.field_edits[field] = _FieldEdit.NO_CONVERT
                    if call is not None:
                        self.released_names.add(_root_name(call.func) or "")
                return
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


def _is_cache(decorator: cst.Decorator) -> bool:
    """`@functools.cache`, `@lru_cache(maxsize=None)` and the like."""
    expr = decorator.decorator
    if isinstance(expr, cst.Call):
        expr = expr.func
    return (dotted_name(expr) or "").rpartition(".")[2] in ("cache", "lru_cache")


def _has_comment(whitespace: cst.BaseParenthesizableWhitespace) -> bool:
    return isinstance(whitespace, cst.ParenthesizedWhitespace) and (
        whitespace.first_line.comment is not None
        or any(line.comment is not None for line in whitespace.empty_lines)
    )


def _joined(
    first: cst.BaseParenthesizableWhitespace,
    second: cst.BaseParenthesizableWhitespace,
    *,
    layout_of_second: bool,
) -> cst.BaseParenthesizableWhitespace:
    """The whitespace that replaces `first`, a removed argument and `second`:
    the layout of one of them (the other if only it breaks the line), with the
    comments of both."""
    layout = second if layout_of_second else first
    if not (_has_comment(first) or _has_comment(second)):
        return layout
    broken = [w for w in (first, second) if isinstance(w, cst.ParenthesizedWhitespace)]
    if not isinstance(layout, cst.ParenthesizedWhitespace):
        layout = broken[0]  # a comment ends its line: keep a line break
    head: cst.TrailingWhitespace | None = None
    lines: list[cst.EmptyLine] = []
    for whitespace in broken:
        comment = whitespace.first_line.comment
        if comment is not None and head is None:
            head = whitespace.first_line
        elif comment is not None:
            # On a line of its own, indented as the arguments are.
            indent = broken[0].last_line
            lines.append(cst.EmptyLine(whitespace=indent, comment=comment))
        lines.extend(whitespace.empty_lines)
    return layout.with_changes(first_line=head or layout.first_line, empty_lines=lines)


def _without_arg(call: cst.Call, index: int) -> cst.Call:
    """`call` without its argument `index`; the comments around it stay."""
    args = list(call.args)
    removed = args.pop(index)
    if isinstance(removed.comma, cst.Comma):
        trailing = removed.comma.whitespace_after
    else:
        trailing = removed.whitespace_after_arg
    if index == len(args) and args:
        last = args[-1]
        assert isinstance(last.comma, cst.Comma)
        if isinstance(removed.comma, cst.Comma):
            comma = last.comma.with_changes(
                whitespace_after=_joined(
                    last.comma.whitespace_after, trailing, layout_of_second=True
                )
            )
            args[-1] = last.with_changes(comma=comma)
        else:
            args[-1] = last.with_changes(
                comma=cst.MaybeSentinel.DEFAULT,
                whitespace_after_arg=_joined(
                    last.comma.whitespace_after, trailing, layout_of_second=True
                ),
            )
    elif index == 0:
        whitespace = _joined(
            call.whitespace_before_args, trailing, layout_of_second=False
        )
        return call.with_changes(args=args, whitespace_before_args=whitespace)
    else:
        before = args[index - 1]
        assert isinstance(before.comma, cst.Comma)
        comma = before.comma.with_changes(
            whitespace_after=_joined(
                before.comma.whitespace_after, trailing, layout_of_second=False
            )
        )
        args[index - 1] = before.with_changes(comma=comma)
    return call.with_changes(args=args)


def _comments(node: cst.CSTNode) -> list[cst.Comment]:
    """The comments inside `node`, in order."""
    found: list[cst.Comment] = []

    class _Collector(cst.CSTVisitor):
        def visit_Comment(self, comment: cst.Comment) -> None:
            found.append(comment)

    node.visit(_Collector())
    return found


class _Rewriter(cst.CSTTransformer):
    """Applies an `_Analysis` plan; every node it was not told about is kept."""

    def __init__(self, analysis: _Analysis, names: Mapping[str, str]) -> None:
        super().__init__()
        self.analysis = analysis
        self.array_module = cst.parse_expression(names["ArrayModule"])
        self.field_type = cst.parse_expression(names["Field"])
        self.field_function = cst.parse_expression(names["field"])

        # Comments of field calls dropped whole, to go above their statement.
        self._moved_comments: list[cst.Comment] = []

    def leave_SimpleStatementLine(
        self,
        original_node: cst.SimpleStatementLine,
        updated_node: cst.SimpleStatementLine,
    ) -> cst.SimpleStatementLine:
        if not self._moved_comments:
            return updated_node
        lines = [cst.EmptyLine(comment=comment) for comment in self._moved_comments]
        self._moved_comments = []
        return updated_node.with_changes(
            leading_lines=[*updated_node.leading_lines, *lines]
        )

    def leave_SimpleStatementSuite(
        self,
        original_node: cst.SimpleStatementSuite,
        updated_node: cst.SimpleStatementSuite,
    ) -> cst.SimpleStatementSuite:
        """`class A(eqx.Module): x: T = eqx.field(...)`: no line above, so the
        comments go at the end of the line."""
        if not self._moved_comments:
            return updated_node
        trailing = updated_node.trailing_whitespace
        texts = [comment.value for comment in self._moved_comments]
        if trailing.comment is not None:
            texts.insert(0, trailing.comment.value)
        self._moved_comments = []
        return updated_node.with_changes(
            trailing_whitespace=trailing.with_changes(
                whitespace=trailing.whitespace
                if trailing.comment is not None
                else cst.SimpleWhitespace("  "),
                comment=cst.Comment("  ".join(texts)),
            )
        )

    def on_leave(
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]:
        if original_node in self.analysis.expression_edits:
            return self.array_module
        return super().on_leave(original_node, updated_node)

    def _no_convert(self, value: cst.BaseExpression | None) -> cst.Call:
        """`value` (a default, `eqx.field(...)` or nothing) as an `af.field` call
        that also says `convert=False`."""
        if value is None:
            return cst.Call(func=self.field_function, args=[_no_convert_arg()])
        if (
            isinstance(value, cst.Call)
            and self.analysis.imports.resolve(value.func) in _SPECIFIERS
        ):
            args = list(value.args)
            if args:
                args[-1] = _with_comma(args[-1])
            return value.with_changes(
                func=self.field_function, args=[*args, _no_convert_arg()]
            )
        return cst.Call(
            func=self.field_function,
            args=[_with_comma(_keyword_arg("default", value)), _no_convert_arg()],
        )

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
            if updated_node.value is not None:
                self._moved_comments.extend(_comments(updated_node.value))
            updated_node = updated_node.with_changes(
                value=None, equal=cst.MaybeSentinel.DEFAULT
            )
        elif edit is _FieldEdit.NO_CONVERT:
            return updated_node.with_changes(
                value=self._no_convert(updated_node.value),
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(" "),
                    whitespace_after=cst.SimpleWhitespace(" "),
                ),
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
            updated_node = updated_node.with_changes(
                annotation=annotation.with_changes(
                    annotation=self._field_type_of(annotation.annotation)
                )
            )
        if original_node in self.analysis.wrap_defaults and updated_node.value:
            default = _keyword_arg("default", updated_node.value)
            updated_node = updated_node.with_changes(
                value=cst.Call(func=self.field_function, args=[default])
            )
        return updated_node

    def _field_type_of(self, annotation: cst.BaseExpression) -> cst.Subscript:
        """`af.Field[annotation]`, with `np.array` read as `np.ndarray` wherever
        it appears (in `Optional[...]`, in a string): a function is no type to a
        checker."""
        annotation = _legacy_as_ndarray(annotation, self.analysis.imports)
        return cst.Subscript(
            value=self.field_type,
            slice=[cst.SubscriptElement(slice=cst.Index(value=annotation))],
        )


class _LegacyAnnotations(cst.CSTTransformer):
    """`np.array` and `jnp.array` as `np.ndarray` and `jnp.ndarray`, strings too."""

    def __init__(self, imports: ImportMap) -> None:
        super().__init__()
        self.imports = imports

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.Attribute:
        if self.imports.resolve(original_node) in _LEGACY_ANNOTATIONS:
            return updated_node.with_changes(attr=cst.Name("ndarray"))
        return updated_node

    def leave_SimpleString(
        self, original_node: cst.SimpleString, updated_node: cst.SimpleString
    ) -> cst.SimpleString:
        text = updated_node.evaluated_value
        if not isinstance(text, str) or text != updated_node.raw_value:
            return updated_node  # escapes: leave the string as written
        try:
            parsed = cst.parse_expression(text)
        except cst.ParserSyntaxError:
            return updated_node
        rewritten = parsed.visit(self)
        assert isinstance(rewritten, cst.BaseExpression)
        if rewritten is parsed or parsed.deep_equals(rewritten):
            return updated_node
        code = cst.Module(body=[]).code_for_node(rewritten)
        quote = updated_node.quote
        return updated_node.with_changes(
            value=f"{updated_node.prefix}{quote}{code}{quote}"
        )


def _legacy_as_ndarray(
    annotation: cst.BaseExpression, imports: ImportMap
) -> cst.BaseExpression:
    rewritten = annotation.visit(_LegacyAnnotations(imports))
    assert isinstance(rewritten, cst.BaseExpression)
    return rewritten


def _keyword_arg(keyword: str, value: cst.BaseExpression) -> cst.Arg:
    """`keyword=value`, spaced as PEP 8 asks."""
    return cst.Arg(
        value=value,
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""),
            whitespace_after=cst.SimpleWhitespace(""),
        ),
    )


def _no_convert_arg() -> cst.Arg:
    return _keyword_arg("convert", cst.Name("False"))


def _with_comma(arg: cst.Arg) -> cst.Arg:
    if isinstance(arg.comma, cst.Comma):
        return arg
    return arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))


def _arrayfield_names(
    wrapper: MetadataWrapper, imports: ImportMap, needed: Sequence[str]
) -> tuple[dict[str, str], str | None]:
    """Source text naming arrayfield's `ArrayModule`, `Field` and `field`, and
    the import to add for the `needed` ones the file does not import (if any)."""
    found = {
        name: imports.local_name_for(f"arrayfield.{name}")
        for name in ("ArrayModule", "Field", "field")
    }
    if all(found[name] is not None for name in needed):
        module, new_import = "arrayfield", None
    elif can_bind(wrapper, "af", "arrayfield"):
        module, new_import = "af", "import arrayfield as af"
    else:
        module, new_import = "arrayfield", "import arrayfield"
    names = {name: text or f"{module}.{name}" for name, text in found.items()}
    return names, new_import


def migrate_module(
    module: cst.Module,
    context: FileContext | None = None,
    *,
    fix: bool = False,
    typed: bool = False,
    scan_calls: bool = True,
    source: str | None = None,
) -> tuple[cst.Module, list[Diagnostic]]:
    """Migrate a parsed module; see `migrate_source`. `scan_calls=False` (for a
    file without `type(` in it) skips looking for `type(...)` classes; `source`,
    the module's text, lets `# noqa: AF002` stop the `--fix` edit too."""
    imports = ImportMap.from_module(module)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    analysis = _Analysis(wrapper, imports, context, fix, typed, source)
    if scan_calls:
        wrapper.visit(analysis)
    else:
        analysis.walk_statements(module)
    diagnostics = sorted(analysis.diagnostics)
    no_convert = _FieldEdit.NO_CONVERT in analysis.field_edits.values()
    needed = [
        name
        for name, edits in (
            ("ArrayModule", analysis.base_edits or analysis.expression_edits),
            ("Field", analysis.wrap_annotations),
            ("field", analysis.wrap_defaults or no_convert),
        )
        if edits
    ]
    if not (needed or analysis.field_edits):
        return module, diagnostics

    names, new_import = _arrayfield_names(wrapper, imports, needed)
    migrated = wrapper.visit(_Rewriter(analysis, names))
    if new_import is not None:
        migrated = add_import(migrated, new_import, next_to=("equinox", "jax"))
    released = analysis.released_names
    if context is not None:
        released = released - context.exported  # other files import them from here
    migrated = remove_unused_imports(migrated, released)
    return migrated, diagnostics


def migrate_source(
    source: str | bytes,
    context: FileContext | None = None,
    *,
    fix: bool = False,
    typed: bool = False,
) -> MigrationResult:
    """Rewrite the equinox Module classes of one file to use arrayfield.

    **Arguments:**

    - `source`: the file's contents. Bytes are decoded the way Python would
        (PEP 263 coding line, else UTF-8) and `MigrationResult.encoding` says how.
    - `context`: what the project index (`_index.ProjectIndex.context`) knows
        about this file: its Module classes whose bases are in other files, and
        how the class and its subclasses use each field. Without it, only
        classes whose base is visibly equinox's Module are analysed.
    - `fix`: also make the safe edits diagnostics ask for (AF002's
        `af.field(convert=False)` on fields used as shapes).
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
    needle = b"type(" if isinstance(source, bytes) else "type("
    scan_calls = needle in source  # pyright: ignore[reportOperatorIssue]
    # libcst reproduces its input exactly: decoding is cheaper than `.code`.
    original = source if isinstance(source, str) else source.decode(module.encoding)
    if original.startswith("\ufeff"):
        original = module.code
    migrated, diagnostics = migrate_module(
        module,
        context,
        fix=fix,
        typed=typed,
        scan_calls=scan_calls,
        source=original,
    )
    return MigrationResult(
        original=original,
        code=original if migrated is module else migrated.code,
        encoding=module.encoding,
        diagnostics=tuple(diagnostics),
    )
