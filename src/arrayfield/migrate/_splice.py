"""The rewrite of a file read with `ast`: the plan's edits spliced into its text.

libcst parses a whole file into objects many times the size of `ast`'s, and
rebuilds every node a rewrite visits: `--diff` on a generated 5 MB file of
Module classes took minutes and gigabytes. Here the `ast` plan (`_check_ast`)
is applied to the text itself, and libcst parses only what it must rewrite:

- a base `eqx.Module`, an alias `Base = eqx.Module`, an annotation wrapped in
  `af.Field[...]` and a default wrapped in `af.field(default=...)` are text
  put in place of, or around, the node's source;
- a field statement whose call changes (a converter dropped, `convert=False`
  added) or whose annotation spells `np.array` is parsed on its own, a few
  lines, and rewritten by the same `Rewriter` as a whole file;
- the file's head (docstring and first block of imports) is parsed on its own
  when `import arrayfield as af` is added or an import is dropped, and goes
  through the same `add_import` and `remove_imports`.

So the text is the one the whole-file rewrite (`_transform.migrate_source`)
gives, byte for byte (`tests/test_migrate_readers.py` compares the two on
every input the tests have). Where a piece could read differently from the
whole (a base in parentheses, two statements on one line, an import to drop
inside a function, a name whose only use may be a comment...), `Undecidable`
is raised and the caller rewrites the whole file with libcst.
"""

from __future__ import annotations

import ast
import bisect
import itertools
import re
from collections.abc import Iterable, Iterator

import libcst as cst

from ._bindings import imports_in
from ._check_ast import AstAnalysis
from ._imports import IDENTIFIER, add_import, remove_imports, used_names
from ._plan import Plan
from ._rewrite import LEGACY_ANNOTATIONS, Rewriter
from ._syntax import Undecidable, one_string_token
from ._transform import MigrationResult, arrayfield_names

# The statement a field statement is parsed under, to keep its indentation.
_BLOCK_HEAD = "if True:"
_PLACEHOLDER = "pass"
# Whitespace that libcst's parse of a whole file does not write back as it was
# read (found by fuzzing the two rewrites against each other): a form feed, a
# carriage return not followed by a line feed, and blanks ending the file.
_REWRITTEN_WHITESPACE = re.compile(r"[\f\v]|\r(?!\n)|[ \t]+\Z")


class _Source:
    """A file's UTF-8 bytes, with the offsets of `ast`'s (line, column)
    positions (columns count UTF-8 bytes)."""

    def __init__(self, lines: list[bytes]) -> None:
        self.lines = lines
        self.data = b"".join(lines)
        self._starts = list(itertools.accumulate(map(len, lines), initial=0))

    def line_start(self, line: int) -> int:
        return self._starts[line - 1]

    def start(self, node: ast.AST) -> int:
        return self._starts[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self._starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]

    def between(self, first: ast.AST, second: ast.AST) -> bytes:
        """The source from the end of `first` to the start of `second`."""
        return self.data[self.end(first) : self.start(second)]


def _default_newline(text: str) -> str:
    """The newline libcst writes where it makes a line: the file's first one."""
    found = re.search(r"\r\n?|\n", text)
    return found.group() if found else "\n"


def _first_line(statement: ast.stmt) -> int:
    """The first line of a statement, its decorators included."""
    decorators = getattr(statement, "decorator_list", None) or []
    return min([statement.lineno, *(d.lineno for d in decorators)])


class _Splice:
    """The edits of one file, as (start, end, new bytes) of its UTF-8 text."""

    def __init__(self, analysis: AstAnalysis) -> None:
        assert analysis.tree is not None  # `analyse_source` keeps its parse
        if analysis.encoding != "utf-8":
            # libcst names encodings and reads a BOM its own way.
            raise Undecidable(f"a file in {analysis.encoding}")
        if _REWRITTEN_WHITESPACE.search(analysis.text):
            # libcst's rewrite of the whole file would not keep these bytes.
            raise Undecidable("a form feed, a lone carriage return or a blank end")
        self.analysis = analysis
        self.tree = analysis.tree
        self.source = _Source(analysis.lines)
        self.newline = _default_newline(analysis.text)
        self.edits: list[tuple[int, int, bytes]] = []
        # Names the rewritten statements use, and the `ast` nodes they replace.
        self.new_names: set[str] = set()
        self.replaced: set[int] = set()
        self.imports = list(imports_in(self.tree.body))

    def text(self) -> str:
        """The file's text with every edit made."""
        out, done = [], 0
        for start, end, new in sorted(self.edits):
            if start < done:
                raise Undecidable("two edits in one place")
            out += [self.source.data[done:start], new]
            done = end
        out.append(self.source.data[done:])
        return b"".join(out).decode("utf-8")

    def replace(self, node: ast.AST, code: str) -> None:
        """`node`'s source replaced by `code` (names only)."""
        start, end = self.source.start(node), self.source.end(node)
        self.edits.append((start, end, code.encode()))
        self.replaced.add(id(node))
        self.new_names.update(IDENTIFIER.findall(code))

    def wrap(self, node: ast.AST, before: str, after: str) -> None:
        """`before` and `after` (names and brackets) put around `node`."""
        self.edits.append(
            (self.source.start(node), self.source.start(node), before.encode())
        )
        self.edits.append(
            (self.source.end(node), self.source.end(node), after.encode())
        )
        self.new_names.update(IDENTIFIER.findall(before))

    # The edits, one kind each.

    def bases(self, array_module: str) -> None:
        """`class A(eqx.Module)` -> `class A(af.ArrayModule)`."""
        for node, indices in self.analysis.base_edits.items():
            for index in indices:
                base = node.bases[index]
                if index == 0:
                    # `class Name(`, with no other bracket before the base
                    start = self.source.start(node)
                    before = self.source.data[start : self.source.start(base)]
                    head, bracket, rest = before.rstrip().partition(b"(")
                    bare = (
                        bracket == b"("
                        and not rest
                        and head[:5] == b"class"
                        and head[5:6].isspace()
                        and head[5:].strip() == node.name.encode()
                    )
                else:
                    bare = (
                        self.source.between(node.bases[index - 1], base).strip() == b","
                    )
                if not bare:
                    raise Undecidable("a base in parentheses")
                self.replace(base, array_module)

    def aliases(self, array_module: str) -> None:
        """`Base = eqx.Module` -> `Base = af.ArrayModule`."""
        assignments = {
            id(statement.value): statement
            for statement in self.tree.body
            if isinstance(statement, ast.Assign)
        }
        for expr in self.analysis.expression_edits:
            statement = assignments.get(id(expr))
            if statement is None:
                raise Undecidable("a base in a type(...) call")
            if self.source.between(statement.targets[-1], expr).strip() != b"=":
                raise Undecidable("an alias in parentheses")
            self.replace(expr, array_module)

    def fields(self, names: dict[str, str]) -> None:
        """Annotations and defaults wrapped as text; the statements whose
        calls change parsed with libcst, all in one module."""
        plan = self.analysis
        statements = set(plan.field_edits) | plan.wrap_annotations | plan.wrap_defaults
        by_libcst = []
        for statement in sorted(statements, key=self.source.start):
            if statement in plan.field_edits or self._legacy(statement.annotation):
                by_libcst.append(statement)
                continue
            if statement in plan.wrap_annotations:
                between = self.source.between(statement.target, statement.annotation)
                if between.strip() != b":":
                    raise Undecidable("an annotation in parentheses")
                self.wrap(statement.annotation, f"{names['Field']}[", "]")
            if statement in plan.wrap_defaults:
                between = self.source.between(statement.annotation, statement.value)
                if between.strip() != b"=":
                    raise Undecidable("a default in parentheses")
                self.wrap(statement.value, f"{names['field']}(default=", ")")
        if by_libcst:
            self._rewrite_statements(by_libcst, names)

    def _legacy(self, annotation: ast.expr) -> bool:
        """Whether the rewrite may respell `np.array` in the annotation (in a
        string too, which only libcst's reading can tell)."""
        for node in ast.walk(annotation):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if "array" in node.value:
                    return True
            elif (
                isinstance(node, ast.Attribute)
                and self.analysis.imports.resolve(node) in LEGACY_ANNOTATIONS
            ):
                return True
        return False

    def _ensure_alone(self, statement: ast.stmt) -> None:
        """Raise unless the statement's lines hold nothing but it (and a
        comment), and no backslash joins them to the lines around."""
        lines = self.source.lines
        first = _first_line(statement)
        # A decorator starts its line; the statement itself may follow another.
        before = (
            lines[first - 1][: statement.col_offset]
            if first == statement.lineno
            else b""
        )
        last = lines[statement.end_lineno - 1]  # type: ignore[index]
        after = last[statement.end_col_offset :].strip()  # type: ignore[misc]
        if (
            before.strip()
            or (after and not after.startswith(b"#"))
            or _continued(last)
            or (first > 1 and _continued(lines[first - 2]))
        ):
            raise Undecidable("a statement on a line with another")

    def _lines_of(self, statement: ast.stmt) -> tuple[int, int]:
        """The byte range of the whole lines of a statement alone on them."""
        self._ensure_alone(statement)
        lines = self.source.lines
        start = self.source.line_start(statement.lineno)
        return start, start + len(
            b"".join(lines[statement.lineno - 1 : statement.end_lineno])
        )

    def _rewrite_statements(
        self, statements: list[ast.stmt], names: dict[str, str]
    ) -> None:
        head = _BLOCK_HEAD + self.newline
        spans = [self._lines_of(statement) for statement in statements]
        module_text = "".join(
            head + self.source.data[start:end].decode("utf-8") for start, end in spans
        )
        try:
            module = cst.parse_module(module_text)
        except cst.ParserSyntaxError as exc:
            raise Undecidable("a field statement libcst reads apart") from exc
        plan = Plan(self.analysis.imports, None, False, False)
        for statement, block in zip(statements, module.body, strict=True):
            node = _only_statement(block)
            if statement in self.analysis.field_edits:
                plan.field_edits[node] = self.analysis.field_edits[statement]
            if statement in self.analysis.wrap_annotations:
                plan.wrap_annotations.add(node)
            if statement in self.analysis.wrap_defaults:
                plan.wrap_defaults.add(node)
        rewritten = module.visit(Rewriter(plan, names))
        for statement, (start, end), block in zip(
            statements, spans, rewritten.body, strict=True
        ):
            code = rewritten.code_for_node(block)
            if not code.startswith(head):
                raise Undecidable("a field statement libcst writes apart")
            if not self.source.data[:end].endswith((b"\n", b"\r")):
                # The file's last line: libcst ends a statement with a newline
                # where a whole module says it had none.
                code = code.removesuffix(self.newline)
            self.edits.append((start, end, code[len(head) :].encode()))
            self.replaced.add(id(statement))
            self.new_names |= used_names(block)

    def head(self, new_import: str | None, candidates: set[str]) -> None:
        """Add `new_import` where `add_import` puts it, and drop the imports
        of `candidates` nothing uses any more, in the file's head."""
        removable = self._unused(candidates)
        if new_import is None and not removable:
            return
        body = self.tree.body
        cut = 0
        if body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.JoinedStr):
                raise Undecidable("an f-string first")  # a docstring to libcst?
            if isinstance(value, ast.Constant) and isinstance(value.value, str | bytes):
                cut = 1
        while cut < len(body) and isinstance(body[cut], ast.Import | ast.ImportFrom):
            cut += 1
        head_statements = body[:cut]
        for statement in body[: cut + 1]:
            self._ensure_alone(statement)
        in_head = {id(statement) for statement in head_statements}
        for statement in self.imports:
            if id(statement) not in in_head and any(
                _binds(statement, name) for name in removable
            ):
                raise Undecidable("an import to drop below the file's head")
        end = len(self.source.data)
        placeholder = ""
        if cut < len(body):
            end = self.source.line_start(_first_line(body[cut]))
            placeholder = _PLACEHOLDER + self.newline
        text = self.source.data[:end].decode("utf-8") + placeholder
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError as exc:
            raise Undecidable("a file head libcst reads apart") from exc
        if new_import is not None:
            first_party = (
                self.analysis.context.lint.first_party
                if self.analysis.context
                else frozenset()
            )
            module = add_import(module, new_import, first_party)
        code = remove_imports(module, removable).code
        if not code.endswith(placeholder):
            raise Undecidable("the file's head written apart")
        self.edits.append((0, end, code[: len(code) - len(placeholder)].encode()))

    def _unused(self, candidates: set[str]) -> set[str]:
        """Those of `candidates` that the new text no longer uses (as
        `_imports.used_names` reads the whole file)."""
        if not candidates:
            return set()
        skipped = [
            (self.source.start(node), self.source.end(node)) for node in self.imports
        ]
        skipped += [(start, end) for start, end, _ in self.edits if start != end]
        skipped.sort()
        new_texts = [new for _, _, new in self.edits]
        mentioned = set()
        for name in candidates:
            # Every place libcst may read the name, and more: in a string,
            # `[A-Za-z_][A-Za-z0-9_]*` finds `eqx` in `'1eqx'` and `'eqxé'` too.
            word = re.compile(
                rb"(?<![A-Za-z_])%s(?![A-Za-z0-9_])" % re.escape(name.encode())
            )
            if any(word.search(text) for text in new_texts) or any(
                not _inside(skipped, found.start())
                for found in word.finditer(self.source.data)
            ):
                mentioned.add(name)
        used = mentioned & self.new_names
        unconfirmed = mentioned - used
        if unconfirmed:
            used |= unconfirmed & _names_used(self.tree, self.replaced, unconfirmed)
        unconfirmed = mentioned - used
        if unconfirmed:
            used |= unconfirmed & self._names_in_strings(unconfirmed)
        if mentioned - used:
            # Mentioned, yet no name or string uses it: a comment, an f-string.
            raise Undecidable("a name whose use only libcst can tell")
        return candidates - used

    def _names_in_strings(self, names: set[str]) -> set[str]:
        """Those of `names` that some string literal's source holds, as
        `_imports.used_names` reads strings (one string token each)."""
        found = set()
        for node in _strings(self.tree, self.replaced):
            raw = self.source.data[self.source.start(node) : self.source.end(node)]
            literal = raw.decode("utf-8")
            words = set(IDENTIFIER.findall(literal))
            hits = (names - found) & words
            if hits and one_string_token(literal):
                found |= hits
        return found


def _continued(line: bytes) -> bool:
    """Whether a backslash joins the next line to this one (or it is a
    comment that ends in one: either way, not a line to cut after)."""
    return line.rstrip(b"\r\n").endswith(b"\\")


def _only_statement(block: cst.BaseStatement) -> cst.AnnAssign:
    """The field statement under a `_BLOCK_HEAD` block."""
    if isinstance(block, cst.If) and isinstance(block.body, cst.IndentedBlock):
        lines = block.body.body
        if len(lines) == 1 and isinstance(lines[0], cst.SimpleStatementLine):
            smalls = lines[0].body
            if len(smalls) == 1 and isinstance(smalls[0], cst.AnnAssign):
                return smalls[0]
    raise Undecidable("a field statement libcst reads apart")


def _inside(spans: list[tuple[int, int]], offset: int) -> bool:
    """Whether `offset` lies in one of the sorted, disjoint `spans`."""
    index = bisect.bisect_right(spans, (offset, float("inf"))) - 1
    return index >= 0 and spans[index][0] <= offset < spans[index][1]


def _binds(statement: ast.Import | ast.ImportFrom, name: str) -> bool:
    """Whether the import binds `name`, as `_imports.binding_name` reads it for
    the remover: relative imports too, which `_bindings.ImportMap` leaves out."""
    for alias in statement.names:
        if alias.name == "*":
            continue
        if alias.asname is not None:
            local = alias.asname
        elif isinstance(statement, ast.Import):
            local = alias.name.split(".")[0]
        else:
            local = alias.name
        if local == name:
            return True
    return False


def _children(node: ast.AST, skipped: set[int]) -> Iterator[ast.AST]:
    for child in ast.iter_child_nodes(node):
        if id(child) not in skipped:
            yield child


def _names_of(node: ast.AST) -> Iterable[str]:
    """The identifiers libcst reads as `Name` nodes at this `ast` node."""
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        yield node.name
    elif isinstance(node, ast.arg | ast.keyword) and node.arg is not None:
        yield node.arg
    elif isinstance(node, ast.Global | ast.Nonlocal):
        yield from node.names
    elif isinstance(node, ast.ExceptHandler) and node.name is not None:
        yield node.name


def _names_used(tree: ast.Module, skipped: set[int], wanted: set[str]) -> set[str]:
    """Those of `wanted` that the tree uses as names, imports and the
    `skipped` nodes left out; stops once all are found."""
    found: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for name in _names_of(node):
            if name in wanted:
                found.add(name)
                if found == wanted:
                    return found
        stack.extend(_children(node, skipped))
    return found


def _strings(tree: ast.Module, skipped: set[int]) -> Iterator[ast.Constant]:
    """The string literals of a tree outside f-strings (whose parts `ast`
    places differently from one Python version to the next), imports and the
    `skipped` nodes left out."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            yield node
        elif not isinstance(node, ast.JoinedStr | ast.Import | ast.ImportFrom):
            stack.extend(_children(node, skipped))


def _af_is_free(text: str) -> bool:
    """`_imports.can_bind` for `af`, where the answer needs no scope analysis."""
    if re.search(r"(?<!\w)af(?!\w)", text):
        raise Undecidable("`af` is a name in the file")
    return True


def splice_source(analysis: AstAnalysis) -> MigrationResult:
    """The migrated text of the file `analysis` has planned (with `ast`), as
    `_transform.migrate_source` writes it. Raises `Undecidable` where only a
    whole-file rewrite can tell."""
    splice = _Splice(analysis)
    names, new_import = arrayfield_names(
        analysis.imports, analysis.names_needed(), lambda: _af_is_free(analysis.text)
    )
    splice.bases(names["ArrayModule"])
    splice.aliases(names["ArrayModule"])
    splice.fields(names)
    released = analysis.released_names
    if analysis.context is not None:
        released = released - analysis.context.exported
    splice.head(new_import, released)
    return MigrationResult(
        original=analysis.text,
        code=splice.text(),
        encoding=analysis.encoding,
        diagnostics=tuple(sorted(analysis.diagnostics)),
    )
