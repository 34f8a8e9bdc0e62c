"""Import statements: which names the rewritten file still uses, adding
`import arrayfield as af` where isort puts it, and dropping, at any depth, the
imports only the replaced code used. A name counts as used where the code
spells it as a name or a string holds it as a word (`__all__`, an annotation):
an import stays while anything may still need it.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from ._bindings import NESTED_BODIES, bound_name, imports_in
from ._lint import STDLIB
from ._text import Edits, Source, first_line

# What reads as a name in a string literal.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Among the lines above a dropped import: the blank line the new import wrote
# below itself as a section of its own (`_Insertion.gap`), not yet in the text.
_GAP_WRITTEN = (-1, -1)


def _names_of(node: ast.AST) -> Iterable[str]:
    """The identifiers a node spells as names."""
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


def _uses(tree: ast.AST, skipped: set[int], wanted: set[str]) -> set[str]:
    """Those of `wanted` that the tree uses as names or as words of its string
    literals (outside f-strings), imports and the `skipped` nodes left out."""
    found: set[str] = set()
    in_fstrings: set[int] = set()  # the strings of an f-string, its fields' too
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str) and id(node) not in in_fstrings:
                found.update(wanted.intersection(IDENTIFIER.findall(node.value)))
        else:
            if isinstance(node, ast.JoinedStr):
                in_fstrings.update(map(id, ast.walk(node)))
            for name in _names_of(node):
                if name in wanted:
                    found.add(name)
        if found == wanted:  # the rest of the tree cannot add to it
            return found
        stack.extend(
            child for child in ast.iter_child_nodes(node) if id(child) not in skipped
        )
    return found


def can_bind(tree: ast.Module, name: str, qualified: str) -> bool:
    """Whether `import <qualified> as <name>` changes what no reference means:
    only imports of `qualified` bind `name`, and no star import may."""
    bound = used = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    return False
                if bound_name(alias, node) == name:
                    if not (isinstance(node, ast.Import) and alias.name == qualified):
                        return False
                    bound = True
        elif isinstance(node, ast.Name) and node.id == name:
            if not isinstance(node.ctx, ast.Load):
                return False
            used = True
        elif isinstance(node, ast.Attribute | ast.keyword):
            continue  # `x.af`, `f(af=1)`: no binding of `af`
        elif name in _names_of(node) or name in (
            getattr(node, "name", None),
            getattr(node, "rest", None),
        ):
            return False  # a definition, a parameter, a match capture...
    return bound or not used


def _isort_key(
    statement: ast.Import | ast.ImportFrom, first_party: frozenset[str]
) -> tuple[int, bool, str]:
    """isort's order (ruff's too): by section, `import x` before `from x import`,
    then by module, ignoring case."""
    if isinstance(statement, ast.Import):
        module = statement.names[0].name
    else:
        module = "." * statement.level + (statement.module or "")
    return _sort_key(module, isinstance(statement, ast.ImportFrom), first_party)


# isort's sections, in order.
_SECTIONS = ("future", "stdlib", "third-party", "first-party", "local")


def _sort_key(
    module: str, is_from: bool, first_party: frozenset[str]
) -> tuple[int, bool, str]:
    top = module.partition(".")[0]
    if module.startswith("."):
        section = "local"
    elif top == "__future__":
        section = "future"
    elif top in first_party:
        section = "first-party"
    elif top in STDLIB:
        section = "stdlib"
    else:
        section = "third-party"
    return _SECTIONS.index(section), is_from, module.lower()


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str | bytes)
    )


def _blocks(body: list[ast.stmt]) -> Iterator[list[ast.stmt]]:
    """Every list of statements in `body`, it first, at any depth."""
    yield body
    for node in body:
        for name in NESTED_BODIES:
            nested = getattr(node, name, None)
            if isinstance(nested, list) and nested:
                if isinstance(nested[0], ast.stmt):
                    yield from _blocks(nested)
                else:  # handlers, match cases
                    for part in nested:
                        yield from _blocks(part.body)


class _Insertion(NamedTuple):
    """The new import: the statement it went above, its edit, its line, and
    the blank line after it (a section of its own)."""

    before: ast.stmt
    edit: int
    line: str
    gap: str


class ImportEditor:
    """The import edits of one file, made into `edits`."""

    def __init__(
        self, tree: ast.Module, edits: Edits, newline: str, first_party: frozenset[str]
    ) -> None:
        self.tree = tree
        self.edits = edits
        self.source = edits.source
        self.newline = newline
        self.first_party = first_party

    def add(self, code: str) -> _Insertion | None:
        """Insert `code` as isort would in the first block of imports: before the
        first statement sorting after it (taking over the lines above it), after
        the last of its section, or as a section; else after the docstring."""
        body, source = self.tree.body, self.source
        start = 1 if body and _is_docstring(body[0]) and source.alone(body[0]) else 0
        block: list[ast.Import | ast.ImportFrom] = []
        for statement in body[start:]:
            if not (
                isinstance(statement, ast.Import | ast.ImportFrom)
                and source.alone(statement)
            ):
                break
            block.append(statement)
        line = code + self.newline
        if not block and start:  # after the docstring, a blank line between
            at = source.after_last_line(body[0])
            self.edits.add(at, at, self.newline + line)
            return None
        if not block:  # above the first statement: below the file's header
            return self._insert(body[0], line, "")
        mine = _sort_key("arrayfield", False, self.first_party)
        keys = [_isort_key(statement, self.first_party) for statement in block]
        same = [s for s, key in zip(block, keys, strict=True) if key[0] == mine[0]]
        for statement, key in zip(block, keys, strict=True):
            if key < mine:
                continue
            if key[0] == mine[0] or not same:
                gap = "" if key[0] == mine[0] else self.newline
                return self._insert(statement, line, gap)
            break
        at = source.after_last_line(same[-1] if same else block[-1])
        self.edits.add(at, at, ("" if same else self.newline) + line)
        return None

    def _insert(self, before: ast.stmt, line: str, gap: str) -> _Insertion:
        at = self.source.line_start(first_line(before))
        return _Insertion(before, self.edits.add(at, at, line + gap), line, gap)

    def prune(self, removable: set[str], insertion: _Insertion | None) -> None:
        """Drop the imports binding a name of `removable`, at any depth."""
        if not removable:
            return
        for block in _blocks(self.tree.body):
            # Most blocks (a class's body) hold no import: nothing to read.
            if any(isinstance(s, ast.Import | ast.ImportFrom) for s in block):
                self._prune_block(block, removable, insertion)

    def _prune_block(
        self, block: list[ast.stmt], removable: set[str], insertion: _Insertion | None
    ) -> None:
        """Drop the imports of `removable` from one block; the lines above a dropped
        one stay above the next statement (less blank ones if it has its own)."""
        source = self.source
        if block is not self.tree.body and source.before(block[0]).strip():
            return  # `if x: import eqx`, on the line of its header
        groups = _line_groups(source, block)
        kept = [[_kept_names(s, removable) for s in group] for group in groups]
        gone = [all(k == [] for k in names) for names in kept]
        if all(gone) and block is not self.tree.body:
            # A block of nothing but these imports (`try: import equinox`): they
            # stay, marked as unused on purpose for pyflakes and ruff (F401).
            for group in groups:
                start, end, commented = source.line_tail(group[-1])
                if not commented:
                    self.edits.add(start, end, "  # noqa: F401")
            return
        orphans: list[tuple[int, int]] = []
        for group, names, dropped in zip(groups, kept, gone, strict=True):
            if dropped:
                orphans += self._lines_above(group[0], insertion)
                first = source.line_start(first_line(group[0]))
                self.edits.add(first, source.after_last_line(group[-1]), "")
                continue
            if any(n is not None for n in names):
                self._rewrite_group(group, names)
            if orphans and any(
                map(self._blank, self._lines_above(group[0], insertion))
            ):
                self._drop_lines(orphans, insertion)
            orphans = []
        # Nothing follows in the block: they go with the imports.
        self._drop_lines(orphans, insertion, comments=True)

    def _drop_lines(
        self,
        spans: list[tuple[int, int]],
        insertion: _Insertion | None,
        comments: bool = False,
    ) -> None:
        """Drop the blank ones of `spans` (the comments too if `comments`)."""
        for span in spans:
            if span == _GAP_WRITTEN:
                assert insertion is not None
                self.edits.replace(insertion.edit, insertion.line)
            elif comments or self._blank(span):
                self.edits.add(*span, "")

    def _blank(self, span: tuple[int, int]) -> bool:
        return span == _GAP_WRITTEN or not self.source.data[span[0] : span[1]].strip()

    def _lines_above(
        self, statement: ast.stmt, insertion: _Insertion | None
    ) -> list[tuple[int, int]]:
        """The blank and comment lines right above a statement (not a header)."""
        if insertion is not None and insertion.before is statement:
            # The new import took the lines above; the blank line below it is
            # the statement's own now.
            return [_GAP_WRITTEN] if insertion.gap else []
        if statement is self.tree.body[0]:
            return []
        spans = []
        line = first_line(statement) - 1
        while line >= 1 and self.source.lines[line - 1].strip()[:1] in (b"", b"#"):
            spans.insert(
                0, (self.source.line_start(line), self.source.line_start(line + 1))
            )
            line -= 1
        return spans

    def _rewrite_group(
        self, group: list[ast.stmt], names: list[list[ast.alias] | None]
    ) -> None:
        """One edit rewriting statements that share a line (`import os; import
        equinox as eqx`), some of which lose names or go."""
        source = self.source
        dropped = _dropped(source, group, [kept != [] for kept in names])
        for statement, kept in zip(group, names, strict=True):
            if kept and isinstance(statement, ast.Import | ast.ImportFrom):
                aliases = statement.names
                dropped += _dropped(source, aliases, [a in kept for a in aliases])
        start, end = source.start(group[0]), source.end(group[-1])
        pieces, done = [], start
        for first, stop in sorted(dropped):
            pieces.append(source.text(done, first))
            done = stop
        self.edits.add(start, end, "".join(pieces) + source.text(done, end))

    def unused(
        self, candidates: set[str], new_code: list[str], replaced: list[ast.AST]
    ) -> set[str]:
        """Those of `candidates` the new text no longer uses: neither `new_code`
        nor the code outside the `replaced` nodes."""
        if not candidates:
            return set()
        words = re.compile("|".join(rf"\b{re.escape(name)}\b" for name in candidates))
        used: set[str] = set()
        for code in new_code:
            if words.search(code):  # the usual edit names none: no parse
                used |= _uses(ast.parse(code), set(), candidates)
        rest = candidates - used
        if self.source.data.isascii():
            # Only a name the untouched code spells can be used by it (Python
            # folds non-ASCII names to NFKC: then every name is looked for).
            # Where a mention is no use: the replaced code, and import statements.
            spans = sorted(
                (self.source.start(node), self.source.end(node))
                for node in [*replaced, *imports_in(self.tree.body)]
            )
            rest = {name for name in rest if self._mentioned(name, spans)}
        if rest:
            used |= _uses(self.tree, {id(node) for node in replaced}, rest)
        return candidates - used

    def _mentioned(self, name: str, spans: list[tuple[int, int]]) -> bool:
        """Whether `name` is a word of the source outside the sorted `spans`."""
        word = re.compile(rb"(?<![A-Za-z0-9_])%s(?![A-Za-z0-9_])" % name.encode())
        for found in word.finditer(self.source.data):
            index = bisect.bisect_right(spans, (found.start(), float("inf"))) - 1
            if index < 0 or not spans[index][0] <= found.start() < spans[index][1]:
                return True
        return False


def _kept_names(statement: ast.stmt, removable: set[str]) -> list[ast.alias] | None:
    """The names an import keeps, or None for a statement that stays whole."""
    if not isinstance(statement, ast.Import | ast.ImportFrom):
        return None
    if any(alias.name == "*" for alias in statement.names):
        return None
    kept = [a for a in statement.names if bound_name(a, statement) not in removable]
    return None if len(kept) == len(statement.names) else kept


def _dropped(
    source: Source, nodes: Sequence[ast.AST], keep: list[bool]
) -> list[tuple[int, int]]:
    """The spans of the nodes not to `keep`, each with the comma or semicolon
    after it (after the last one kept: the one before), so none is left stray."""
    last = max(index for index, flag in enumerate(keep) if flag)
    spans = [
        (source.start(nodes[index]), source.start(nodes[index + 1]))
        for index in range(last)
        if not keep[index]
    ]
    if last < len(nodes) - 1:
        spans.append((source.end(nodes[last]), source.end(nodes[-1])))
    return spans


# What lies between two statements a semicolon joins: blanks and backslash
# continuations around one `;`, no newline of their own.
_JOINED = re.compile(rb"(?:[ \t\f]|\\(?:\r\n|\r|\n))*;(?:[ \t\f]|\\(?:\r\n|\r|\n))*")


def _line_groups(source: Source, block: list[ast.stmt]) -> list[list[ast.stmt]]:
    """The statements of a block, grouped as semicolons join them (`a; b`); a
    trailing `a;` joins nothing on a later line."""
    groups: list[list[ast.stmt]] = []
    for statement in block:
        if groups and _JOINED.fullmatch(
            source.data, source.end(groups[-1][-1]), source.start(statement)
        ):
            groups[-1].append(statement)
        else:
            groups.append([statement])
    return groups
