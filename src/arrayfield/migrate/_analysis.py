"""The analysis pass over a libcst tree: find the Module classes of a file and
plan the rewrite.

`Analysis` walks a parsed file once and hands what it finds, class and function
statements, fields and `self.<attr> = ...` statements, to the `Plan` (`_plan`),
which decides the edits and the diagnostics. It changes nothing: `_rewrite`
applies the plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from ._bindings import ImportMap
from ._index import FileContext
from ._plan import Plan
from ._site import Assignment, FieldSite, shorten
from ._statements import small_statements, walk_definitions


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


def snippet(node: cst.CSTNode) -> str:
    """The node's source on one line, cut to 40 characters."""
    return shorten(cst.Module(body=[]).code_for_node(node))


class Analysis(Plan, cst.CSTVisitor):
    """Finds Module classes in a libcst tree and plans what to rewrite."""

    def __init__(
        self,
        wrapper: MetadataWrapper,
        imports: ImportMap,
        context: FileContext | None,
        fix: bool,
        typed: bool,
        source: str | None = None,
    ) -> None:
        Plan.__init__(self, imports, context, fix, typed, source)
        cst.CSTVisitor.__init__(self)
        self.wrapper = wrapper
        # Computing libcst's positions costs a code generation pass over the
        # whole file: the field positions the index read with `ast` come first.
        self._positions: Mapping[cst.CSTNode, CodeRange] | None = None

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        known = self.known_positions.get(node)
        if known is not None:
            return known
        if self._positions is None:
            self._positions = self.wrapper.resolve(PositionProvider)
        start = self._positions[node].start
        return start.line, start.column + 1

    def snippet(self, node: cst.CSTNode) -> str:
        return snippet(node)

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

    def visit_Module(self, node: cst.Module) -> None:
        for statement in node.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.Assign):
                    targets = [target.target for target in small.targets]
                    self.module_assignment(targets, small.value)

    def visit_Call(self, node: cst.Call) -> None:
        self.call(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.enter_function([decorator.decorator for decorator in node.decorators])

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.leave_function()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.enter_class(node, node.name.value, [base.value for base in node.bases])

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.leave_class()

    def field_sites(self, node: cst.ClassDef, qualname: str) -> list[FieldSite]:
        statements = _class_statements(node)
        assignments: list[Assignment] = []
        for statement in statements:
            if isinstance(statement, cst.FunctionDef) and statement.params.params:
                assignments.extend(_self_assignments(statement))
        context = self._class_context(qualname)
        sites = []
        for statement in statements:
            if isinstance(statement, cst.AnnAssign) and isinstance(
                statement.target, cst.Name
            ):
                call = self.specifier_call(statement.value)
                keywords = {
                    arg.keyword.value: arg
                    for arg in (call.args if call else ())
                    if arg.keyword
                }
                site = FieldSite(
                    qualname,
                    statement,
                    statement.annotation.annotation,
                    call,
                    keywords,
                    assignments,
                    context,
                    self.context,
                    self.imports,
                    self.position,
                    snippet,
                    self.module_values,
                )
                sites.append(site)
        return sites
