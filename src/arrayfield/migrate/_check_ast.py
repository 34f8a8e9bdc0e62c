"""The analysis pass over an `ast` tree: a file's diagnostics, and whether the
rewrite would change it, without libcst.

Parsing with libcst (and importing it) costs most of `arrayfield migrate
--check` on a large tree, yet the report needs no source text to be written:
only the diagnostics and which files would change. `check_source` walks the
`ast` tree as `_analysis.Analysis` walks the libcst one, in the same order, and
hands the same statements to the same `Plan` (`_plan`), so the verdicts agree;
`_splice` writes the new text of the files the command writes or previews from
this plan.

Where the `ast` tree may read differently from libcst's (`_syntax.Undecidable`),
`check_source` raises, and the caller analyses the file with libcst.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import tokenize
import unicodedata
from collections.abc import Iterable
from io import BytesIO
from typing import Any

from . import _syntax as syntax
from ._bindings import NESTED_BODIES, ImportMap, nested_statements
from ._checks import calls_matter
from ._diagnostics import Diagnostic
from ._index import FileContext
from ._plan import Plan
from ._site import Assignment, FieldSite, shorten

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Identifier characters, and brackets that end what a call's `(` follows.
_CALLEE_END = frozenset(
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_)]"
)


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """The outcome of checking one file without rewriting it.

    **Fields:**

    - `original`: the source text as read.
    - `encoding`: the file's encoding.
    - `diagnostics`: the places that need a human decision, sorted by position.
    - `changed`: whether the rewrite would change the file.
    """

    original: str
    encoding: str
    diagnostics: tuple[Diagnostic, ...]
    changed: bool


def _small_statements(body: Iterable[ast.AST]) -> Iterable[ast.AST]:
    """Every simple statement in a body, at any depth, in libcst's walk order."""
    for node in body:
        if isinstance(node, ast.stmt) and not any(
            isinstance(getattr(node, name, None), list) for name in NESTED_BODIES
        ):
            yield node
        else:
            yield from _small_statements(nested_statements(node))


def _self_assignments(
    method: ast.FunctionDef | ast.AsyncFunctionDef,
) -> list[Assignment]:
    """`self.<attr> = value` statements in a method, nested classes excluded.
    `self` is the first parameter after any positional-only ones, as libcst's
    `params` has it."""
    self_name = method.args.args[0].arg
    found: list[Assignment] = []
    statements = [node for node in method.body if not isinstance(node, ast.ClassDef)]
    for small in _small_statements(statements):
        if isinstance(small, ast.Assign):
            targets, value = small.targets, small.value
        elif isinstance(small, ast.AnnAssign) and small.value is not None:
            targets, value = [small.target], small.value
        else:
            continue
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == self_name
            ):
                found.append((target.attr, value, small))
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
            diagnostics=tuple(sorted(self.diagnostics)),
            changed=self.changes,
        )

    def position(self, node: Any) -> tuple[int, int]:
        known = self.known_positions.get(node)
        if known is not None:
            return known
        prefix = self.lines[node.lineno - 1][: node.col_offset]
        return node.lineno, len(prefix.decode("utf-8", errors="replace")) + 1

    def snippet(self, node: Any) -> str:
        """As libcst prints the node: with its own parentheses, which `ast`
        leaves out of a node's position (tuples aside); a node that may have
        some is `Undecidable`."""
        before = self.lines[node.lineno - 1][: node.col_offset].rstrip(b" \t")
        if not before:
            raise syntax.Undecidable("an expression that starts a line")
        if before.endswith(b"("):
            callee = before[:-1].rstrip(b" \t")
            if not callee or callee[-1] not in _CALLEE_END:
                raise syntax.Undecidable("a parenthesized expression")
        return shorten(syntax.segment(self.lines, node))

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
            elif isinstance(node, ast.stmt | ast.excepthandler | ast.match_case):
                self._definitions(nested_statements(node))

    def _enter(
        self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    ) -> None:
        if isinstance(node, ast.ClassDef):
            if any(isinstance(base, ast.Starred) for base in node.bases):
                raise syntax.Undecidable("a starred base")
            self.enter_class(node, node.name, node.bases)
        else:
            self.enter_function(node.decorator_list)

    def _leave(self, node: ast.AST) -> None:
        if isinstance(node, ast.ClassDef):
            self.leave_class()
        else:
            self.leave_function()

    def _visit(self, node: ast.AST) -> None:
        """A visit in libcst's order: a definition is entered before its
        decorators, bases and parameters are visited."""
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
                # Only annotations hold strings and indices the readers parse.
                syntax.ensure_same_reading(statement.annotation, self.lines)
                call = self.specifier_call(statement.value)
                keywords = syntax.call_keywords(call) if call is not None else {}
                site = FieldSite(
                    qualname,
                    statement,
                    statement.annotation,
                    call,
                    keywords,
                    assignments,
                    context,
                    self.context,
                    self.imports,
                    self.position,
                    self.snippet,
                    self.module_values,
                )
                sites.append(site)
        return sites


# A word with a character outside ASCII (combining marks are not `\w`, and NFKC
# may reorder them: they stay in the word).
_UNICODE_WORD = re.compile(r"(?:\w|[^\x00-\x7f])*[^\x00-\x7f](?:\w|[^\x00-\x7f])*")


def _ensure_normalized_names(text: str) -> None:
    """Raise `Undecidable` where a name may be spelled otherwise than `ast`
    reads it: Python's parser folds names to NFKC (a fullwidth `e` is an `e`),
    libcst keeps them as written."""
    if text.isascii() or unicodedata.is_normalized("NFKC", text):
        return
    for word in _UNICODE_WORD.findall(text):
        if not unicodedata.is_normalized("NFKC", word):
            raise syntax.Undecidable(f"a name that NFKC folds: {word}")


def analyse_source(
    source: bytes,
    context: FileContext | None = None,
    *,
    fix: bool = False,
    typed: bool = False,
    tree: ast.Module | None = None,
) -> AstAnalysis:
    """The plan of `source`'s migration, read with `ast` (see `check_source`)."""
    encoding, _ = tokenize.detect_encoding(BytesIO(source).readline)
    text = source.decode(encoding)
    _ensure_normalized_names(text)
    if tree is None:
        tree = ast.parse(text)
    analysis = AstAnalysis(text, ImportMap.from_ast(tree), context, fix, typed)
    analysis.encoding = encoding
    analysis.tree = tree
    analysis.walk(tree, scan_calls=calls_matter(text))
    return analysis


def check_source(
    source: bytes,
    context: FileContext | None = None,
    *,
    fix: bool = False,
    typed: bool = False,
    tree: ast.Module | None = None,
) -> CheckResult:
    """What `_transform.migrate_source` reports for `source` (the diagnostics,
    and whether the code changes), read with `ast`. `tree` is the file's parse
    when the caller has one.

    Raises `_syntax.Undecidable` where libcst may read the file differently,
    `SyntaxError`, `UnicodeDecodeError` or `LookupError` (an unknown coding)
    for a file that does not decode or parse: the caller then migrates it with
    libcst, which reports those as libcst does.
    """
    return analyse_source(source, context, fix=fix, typed=typed, tree=tree).result()
