"""The writer: a file's new text, its plan's edits spliced into the old one.

Every edit is text put at `ast` positions (`_text`), so every byte the plan
does not name stays as it was: bases, field statements (`_arguments` edits
their calls), then the imports (`_imports`).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Callable

from ._arguments import with_keyword, without_keyword
from ._diagnostics import Diagnostic
from ._imports import ImportEditor, can_bind
from ._index import FileContext
from ._read import AstAnalysis, analyse_source
from ._site import FieldEdit
from ._syntax import parse_expression
from ._text import Edits, Source, comments, tokens

# Legacy annotations: functions, not types; `ndarray` is the type each stands for.
LEGACY_ANNOTATIONS = frozenset({"numpy.array", "jax.numpy.array"})


@dataclasses.dataclass(frozen=True)
class MigrationResult:
    """One file migrated: its text as read and migrated, its encoding (to write
    `code` back), and the diagnostics no `# noqa` silences, by position."""

    original: str
    code: str
    encoding: str
    diagnostics: tuple[Diagnostic, ...]

    @property
    def changed(self) -> bool:
        return self.code != self.original


class _Splice:
    """The edits of one file, as (start, end, new bytes) of its UTF-8 text."""

    def __init__(self, analysis: AstAnalysis) -> None:
        assert analysis.tree is not None  # `analyse_source` keeps its parse
        self.analysis = analysis
        self.tree = analysis.tree
        self.source = Source(analysis.lines)
        self.edits = Edits(self.source)
        found = re.search(r"\r\n?|\n", analysis.text)
        # The line break a new line gets: the file's first.
        self.newline = found.group() if found else "\n"
        # What the edits write and replace: which names the new text uses.
        self.new_code: list[str] = []
        self.replaced: list[ast.AST] = []

    def _replace(self, node: ast.AST, code: str) -> None:
        self.edits.add(self.source.start(node), self.source.end(node), code)
        self.replaced.append(node)
        self.new_code.append(code)

    def arrayfield_names(self) -> tuple[dict[str, str], str | None]:
        """Text naming `ArrayModule`, `Field` and `field`, and the import to add."""
        analysis = self.analysis
        found = {
            name: analysis.imports.local_name_for(f"arrayfield.{name}")
            for name in ("ArrayModule", "Field", "field")
        }
        if all(found[name] is not None for name in analysis.names_needed()):
            module, new_import = "arrayfield", None
        elif re.search(r"(?<!\w)af(?!\w)", analysis.text) is None or can_bind(
            self.tree, "af", "arrayfield"
        ):  # a file without the word `af` needs no walk
            module, new_import = "af", "import arrayfield as af"
        else:
            module, new_import = "arrayfield", "import arrayfield"
        names = {name: text or f"{module}.{name}" for name, text in found.items()}
        return names, new_import

    def base_references(self, array_module: str) -> None:
        """Bases and `Base = eqx.Module` name `af.ArrayModule` instead."""
        for node, indices in self.analysis.base_edits.items():
            for index in indices:
                self._replace(node.bases[index], array_module)
        for expr in self.analysis.expression_edits:
            self._replace(expr, array_module)

    def field(self, statement: ast.AnnAssign, names: dict[str, str]) -> None:
        """A field statement's new text: the call's edit, then the wraps."""
        plan, source = self.analysis, self.source
        start = source.start(statement)
        text = source.text(start, source.end(statement))

        def local(node: ast.AST, end: bool = False) -> int:
            at = source.end(node) if end else source.start(node)
            return len(source.data[start:at].decode("utf-8"))

        annotation_start, annotation_end, value_start = _cut(statement, text, local)
        head = text[:annotation_start]
        annotation = text[annotation_start:annotation_end]
        equal_text = text[annotation_end:value_start]
        value = text[value_start:] if statement.value is not None else None
        edit = plan.field_edits.get(statement)
        if edit is FieldEdit.DROP_DEFAULT:
            self._move_comments(statement, comments(value or ""))
            value = None
        elif edit is FieldEdit.NO_CONVERT:
            equal_text = " = "
            if value is None:
                value = f"{names['field']}(convert=False)"
            elif plan.specifier_call(statement.value) is not None:
                func = statement.value.func  # type: ignore[union-attr]
                callee = (
                    local(func) - value_start,
                    local(func, end=True) - value_start,
                )
                value = with_keyword(value, callee, names["field"], "convert=False")
            else:
                value = f"{names['field']}(default={value}, convert=False)"
        elif edit is FieldEdit.DROP_CONVERTER:
            assert isinstance(statement.value, ast.Call) and value is not None
            func_end = local(statement.value.func, end=True) - value_start
            value = without_keyword(value, func_end, "converter", self.newline)
        if statement in plan.wrap_annotations:
            shift = local(statement.annotation) - annotation_start
            annotation = annotation[:shift] + self._respelled(annotation[shift:])
            annotation = f"{names['Field']}[{annotation}]"
        if statement in plan.wrap_defaults and value is not None:
            value = f"{names['field']}(default={value})"
        new = head + annotation + (equal_text + value if value is not None else "")
        self._replace(statement, new)

    def _respelled(self, code: str) -> str:
        """`np.array` spelled `ndarray` (in strings too): a function is no type."""
        parsed = "array" in code and parse_expression(code)
        if not parsed:
            return code  # nothing to respell
        lines = Source(code.encode("utf-8").splitlines(keepends=True))

        def local(at: int) -> int:
            return len(lines.data[:at].decode("utf-8"))

        edits = []
        for node in ast.walk(parsed):
            if (
                isinstance(node, ast.Attribute)
                and self.analysis.imports.resolve(node) in LEGACY_ANNOTATIONS
            ):
                stop = local(lines.end(node))
                edits.append((stop - len("array"), stop, "ndarray"))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                first, stop = local(lines.start(node)), local(lines.end(node))
                literal = re.fullmatch(r"([rRuU]?)('|\")(.*)\2", code[first:stop], re.S)
                if literal is None or literal.group(3) != node.value:
                    continue  # escapes, quotes inside, concatenation: as written
                new = self._respelled(node.value)
                if new != node.value:
                    quoted = literal.group(1) + literal.group(2)
                    edits.append((first, stop, quoted + new + literal.group(2)))
        for first, stop, new in sorted(edits, reverse=True):
            code = code[:first] + new + code[stop:]
        return code

    def _move_comments(self, statement: ast.AnnAssign, comments: list[str]) -> None:
        """A dropped call's comments: above the field, or after it where it follows
        its class's colon (`class A(eqx.Module): x: T = ...`)."""
        if not comments:
            return
        source = self.source
        before = source.before(statement).rstrip(b" \t")
        if not before or before.endswith(b";"):
            line = source.lines[statement.lineno - 1]
            indent = line[: len(line) - len(line.lstrip(b" \t"))].decode()
            at = source.line_start(statement.lineno)
            self.edits.add(at, at, "".join(indent + c + self.newline for c in comments))
            return
        # After a comment already there, else in place of the trailing blanks.
        start, end, commented = source.line_tail(statement)
        self.edits.add(end if commented else start, end, "  " + "  ".join(comments))


def _cut(
    statement: ast.AnnAssign, text: str, local: Callable[..., int]
) -> tuple[int, int, int]:
    """Where the annotation starts and ends and the value starts in the field's
    `text`, with the brackets `ast` leaves out of a node's place."""
    target_end = local(statement.target, end=True)
    annotation_start = local(statement.annotation)
    annotation_end = local(statement.annotation, end=True)
    value_start = local(statement.value) if statement.value else len(text)
    between = text[annotation_end:value_start].strip()
    if text[target_end:annotation_start].strip() == ":" and between in ("=", ""):
        return annotation_start, annotation_end, value_start
    found = tokens(text)  # brackets: read where the colon and `=` are
    colon = next(t for t in found if t.start >= target_end and t.string == ":")
    annotation_start = next(t.start for t in found if t.start >= colon.end)
    if statement.value is None:
        return annotation_start, len(text), len(text)
    equal = max(
        (t for t in found if t.string == "=" and t.end <= value_start),
        key=lambda t: t.start,
    )
    value_start = next(t.start for t in found if t.start >= equal.end)
    return annotation_start, len(text[: equal.start].rstrip()), value_start


def splice_source(analysis: AstAnalysis) -> MigrationResult:
    """The migrated text of the file `analysis` has planned."""
    splice = _Splice(analysis)
    names, new_import = splice.arrayfield_names()
    splice.base_references(names["ArrayModule"])
    fields = analysis.field_edits
    for statement in set(fields) | analysis.wrap_annotations | analysis.wrap_defaults:
        splice.field(statement, names)
    # The names the replaced code used, less those other files import from here.
    context = analysis.context
    released = analysis.released_names - (context.exported if context else set())
    first_party = context.lint.first_party if context else frozenset()
    imports = ImportEditor(splice.tree, splice.edits, splice.newline, first_party)
    removable = imports.unused(released, splice.new_code, splice.replaced)
    insertion = None if new_import is None else imports.add(new_import)
    imports.prune(removable, insertion)
    return MigrationResult(
        original=analysis.text,
        code=splice.edits.apply(),
        encoding=analysis.encoding,
        diagnostics=analysis.reported(),
    )


def migrate_source(
    source: str | bytes,
    context: FileContext | None = None,
    *,
    fix: bool = False,
    typed: bool = False,
) -> MigrationResult:
    """Rewrite the equinox Module classes of one file to use arrayfield, as
    `analyse_source` plans it (see there for how `source` is decoded and what
    it raises). `context` is what the project index knows about the file;
    without it only classes whose base is visibly equinox's Module are read.
    `fix` also makes the safe edits diagnostics ask for (`convert=False`),
    `typed` also wraps array fields in `af.Field[...]`/`af.field(default=...)`.
    """
    return splice_source(analyse_source(source, context, fix=fix, typed=typed))
