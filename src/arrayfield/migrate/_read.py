"""The analysis pass over a file's `ast` tree: it hands every class, function,
field and call to the `Plan` (`_plan`), which gives the file's diagnostics and
edits; `_splice` writes the new text of the files the command writes or
previews from that plan.
"""

from __future__ import annotations

import ast
import tokenize
from collections.abc import Iterable
from io import BytesIO
from typing import Any, NamedTuple

from . import _syntax as syntax
from ._bindings import ImportMap, has_block, nested_statements, statements_in
from ._checks import calls_matter
from ._diagnostics import Diagnostic
from ._index import FileContext
from ._plan import Plan
from ._site import Assignment, FieldSite

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Identifier characters, and brackets that end what a call's `(` follows.
_CALLEE_END = frozenset(
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_)]"
)


class CheckResult(NamedTuple):
    """The outcome of checking one file without rewriting it.

    **Fields:**

    - `original`: the source text as read.
    - `encoding`: the file's encoding.
    - `diagnostics`: the places that need a human decision and no `# noqa`
        silences, sorted by position.
    - `changed`: whether the rewrite would change the file.
    """

    original: str
    encoding: str
    diagnostics: tuple[Diagnostic, ...]
    changed: bool


def _self_assignments(
    method: ast.FunctionDef | ast.AsyncFunctionDef,
) -> list[Assignment]:
    """`self.<attr> = value` statements in a method, nested classes excluded.
    `self` is the first parameter after any positional-only ones."""
    self_name = method.args.args[0].arg
    found: list[Assignment] = []
    statements = [node for node in method.body if not isinstance(node, ast.ClassDef)]
    for statement in statements_in(statements):
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            targets, value = [statement.target], statement.value
        else:
            continue
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == self_name
            ):
                found.append((target.attr, value, statement))
    return found


class AstAnalysis(Plan):
    """Finds Module classes in an `ast` tree and plans what to rewrite."""

    def __init__(
        self,
        text: str,
        imports: ImportMap,
        context: FileContext | None,
        fix: bool,
        typed: bool,
    ) -> None:
        super().__init__(imports, context, fix, typed, text)
        self.text = text
        self.encoding = "utf-8"  # as detected: "utf-8-sig" after a BOM
        self.tree: ast.Module | None = None  # the parse walked
        # ast counts columns in UTF-8 bytes of the decoded text.
        self.lines = text.encode("utf-8").splitlines(keepends=True)

    def result(self) -> CheckResult:
        return CheckResult(
            original=self.text,
            encoding="utf-8" if self.encoding == "utf-8-sig" else self.encoding,
            diagnostics=self.reported(),
            changed=self.changes,
        )

    def position(self, node: Any) -> tuple[int, int]:
        known = self.known_positions.get(node)
        if known is not None:
            return known
        prefix = self.lines[node.lineno - 1][: node.col_offset]
        return node.lineno, len(prefix.decode("utf-8", errors="replace")) + 1

    def snippet(self, node: Any) -> str:
        """The node's source with the parentheses written around it, which
        `ast` leaves out of its position (a call's own bracket aside)."""
        first, last = self.lines[node.lineno - 1], self.lines[node.end_lineno - 1]
        chunk = b"".join(self.lines[node.lineno - 1 : node.end_lineno])
        end = len(chunk) - len(last) + node.end_col_offset
        text = chunk[node.col_offset : end].decode()
        before = first[: node.col_offset].rstrip(b" \t")
        after = last[node.end_col_offset :].lstrip(b" \t")
        while before.endswith(b"(") and after.startswith(b")"):
            callee = before[:-1].rstrip(b" \t")
            if callee and callee[-1] in _CALLEE_END:
                break  # the bracket of a call
            text, before, after = f"({text})", callee, after[1:].lstrip(b" \t")
        text = " ".join(text.split())  # on one line, cut to 40 characters
        return text if len(text) <= 40 else text[:37] + "..."

    def walk(self, tree: ast.Module, *, scan_calls: bool) -> None:
        """Every definition of the file, and with `scan_calls` every call."""
        for statement in tree.body:
            if isinstance(statement, ast.Assign):
                self.module_assignment(statement.targets, statement.value)
        if scan_calls:
            self._visit(tree)
        else:
            self._definitions(tree.body)

    def _definitions(self, body: Iterable[ast.AST]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                self._enter(node)
                self._definitions(node.body)
                self._leave(node)
            elif has_block(node):
                self._definitions(nested_statements(node))

    def _enter(
        self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    ) -> None:
        if isinstance(node, ast.ClassDef):
            self.enter_class(node, node.name, node.bases)
        else:
            self.enter_function(node.decorator_list)

    def _leave(self, node: ast.AST) -> None:
        if isinstance(node, ast.ClassDef):
            self.leave_class()
        else:
            self.leave_function()

    def _visit(self, node: ast.AST) -> None:
        """A visit in which a definition is entered before its decorators,
        bases and parameters are visited."""
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            self._enter(node)
            children: list[ast.AST] = [*node.decorator_list]
            if isinstance(node, ast.ClassDef):
                children += [*node.bases, *node.keywords]
            else:
                children += [node.args] + ([node.returns] if node.returns else [])
            for child in [*children, *node.body]:
                self._visit(child)
            self._leave(node)
            return
        if isinstance(node, ast.Call):
            self.call(node)
        for child in ast.iter_child_nodes(node):
            self._visit(child)

    def field_sites(self, node: ast.ClassDef, qualname: str) -> list[FieldSite]:
        assignments: list[Assignment] = []
        for statement in node.body:
            if isinstance(statement, _FUNCTIONS) and statement.args.args:
                assignments.extend(_self_assignments(statement))
        context = self._class_context(qualname)
        sites = []
        for statement in node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(
                statement.target, ast.Name
            ):
                call = self.specifier_call(statement.value)
                sites.append(
                    FieldSite(
                        qualname,
                        statement,
                        call,
                        assignments,
                        context,
                        self.context,
                        self.imports,
                        self.position,
                        self.snippet,
                        self.module_values,
                        {} if call is None else syntax.call_keywords(call),
                    )
                )
        return sites


def analyse_source(
    source: bytes | str,
    context: FileContext | None = None,
    *,
    fix: bool = False,
    typed: bool = False,
    tree: ast.Module | None = None,
) -> AstAnalysis:
    """The plan of `source`'s migration. `source` as bytes is decoded the way
    Python would (PEP 263 coding line, else UTF-8); `tree` is its parse when
    the caller has one.

    Raises `SyntaxError`, `ValueError` (null bytes), `UnicodeDecodeError` or
    `LookupError` (an unknown coding) for a file that does not parse or decode.
    """
    if isinstance(source, str):
        encoding, text = "utf-8", source
    else:
        encoding, _ = tokenize.detect_encoding(BytesIO(source).readline)
        text = source.decode(encoding)
    if tree is None:
        tree = ast.parse(text)
    imports = ImportMap.from_ast(tree, context.bindings if context else None)
    analysis = AstAnalysis(text, imports, context, fix, typed)
    analysis.encoding = encoding
    analysis.tree = tree
    analysis.walk(tree, scan_calls=calls_matter(text))
    return analysis
