"""Diagnostics for a file that needs no rewrite, without parsing all of it.

Parsing a whole file with libcst costs most of `arrayfield migrate --check` on
a large tree, yet most files with Module classes (subclasses of a project base
class defined elsewhere) need no rewrite, only diagnostics. For those, the file
is outlined: its imports, its class and function statements, the fields of its
classes and the `self.<attr> = ...` statements of their methods, each parsed
with libcst on its own from the source text that `ast` located, and assembled
into a small module that the analysis (`_analysis`) reads as it would read the
whole file, with every position taken from `ast`.

`needs_full_parse` says which files cannot be outlined: those the rewrite may
change, and those with constructs the outline leaves out.
"""

from __future__ import annotations

import ast
import tokenize
from io import BytesIO

import libcst as cst

from ._analysis import Analysis
from ._diagnostics import Diagnostic
from ._imports import ImportMap
from ._index import FileContext
from ._names import dotted_name


def needs_full_parse(
    source: bytes, context: FileContext, *, fix: bool, typed: bool
) -> bool:
    """Whether the file may be rewritten (or analysed beyond the outline):
    `--fix` and `--typed` edit fields, a file that imports equinox may hold an
    equinox base or alias, a converter may be dropped, and `type(...)` classes
    are found by a full visit."""
    return (
        fix
        or typed
        or bool(context.equinox_bases)
        or b"equinox" in source
        or b"converter" in source
        or b"type(" in source
    )


class _Outliner:
    def __init__(self, text: str) -> None:
        # ast counts columns in UTF-8 bytes of the decoded text.
        self.lines = text.encode("utf-8").splitlines(keepends=True)
        # Node of the outline -> (line, column) in the file, 1-based.
        self.positions: dict[cst.CSTNode, tuple[int, int]] = {}

    def _segment(self, node: ast.AST) -> str:
        start, end = node.lineno - 1, node.end_lineno or node.lineno  # type: ignore[attr-defined]
        chunk = b"".join(self.lines[start:end])
        end_col = node.end_col_offset  # type: ignore[attr-defined]
        tail = len(self.lines[end - 1]) - end_col
        body = chunk[node.col_offset : len(chunk) - tail]  # type: ignore[attr-defined]
        return body.decode("utf-8")

    def _column(self, line: int, col_offset: int) -> int:
        prefix = self.lines[line - 1][:col_offset]
        return len(prefix.decode("utf-8", errors="replace")) + 1

    def _statement(self, node: ast.stmt) -> cst.SimpleStatementLine:
        parsed = cst.parse_statement(self._segment(node) + "\n")
        assert isinstance(parsed, cst.SimpleStatementLine)
        self.positions[parsed.body[0]] = (
            node.lineno,
            self._column(node.lineno, node.col_offset),
        )
        return parsed

    def module(self, tree: ast.Module) -> cst.Module:
        return cst.Module(body=self._body(tree.body, in_class=False))

    def _body(
        self, body: list[ast.stmt], *, in_class: bool
    ) -> list[cst.SimpleStatementLine | cst.BaseCompoundStatement]:
        out: list[cst.SimpleStatementLine | cst.BaseCompoundStatement] = []
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                out.append(self._statement(node))
            elif isinstance(node, ast.ClassDef):
                out.append(self._class(node))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                out.append(self._function(node, in_class=in_class))
            elif in_class and isinstance(node, ast.AnnAssign):
                out.append(self._statement(node))
            elif not in_class and isinstance(node, ast.Assign):
                # `Base = Alias`: module-level names the analysis reads.
                if dotted_name(node.value) is not None:
                    out.append(self._statement(node))
            else:
                for name in ("body", "orelse", "handlers", "finalbody", "cases"):
                    nested = getattr(node, name, None)
                    if isinstance(nested, list):
                        for child in nested:
                            inner = (
                                child.body
                                if not isinstance(child, ast.stmt)
                                else [child]
                            )
                            out.extend(self._body(inner, in_class=in_class))
        return out

    def _class(self, node: ast.ClassDef) -> cst.ClassDef:
        header = [self._segment(base) for base in node.bases]
        header += [self._segment(keyword) for keyword in node.keywords]
        parsed = cst.parse_statement(f"class {node.name}({', '.join(header)}): pass\n")
        assert isinstance(parsed, cst.ClassDef)
        body = self._body(node.body, in_class=True) or [
            cst.SimpleStatementLine(body=[cst.Pass()])
        ]
        return parsed.with_changes(body=cst.IndentedBlock(body=body))

    def _function(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef, *, in_class: bool
    ) -> cst.FunctionDef:
        positional = [*node.args.posonlyargs, *node.args.args]
        params = positional[0].arg if positional else ""
        parsed = cst.parse_statement(f"def {node.name}({params}): pass\n")
        assert isinstance(parsed, cst.FunctionDef)
        body: list[cst.SimpleStatementLine | cst.BaseCompoundStatement] = []
        if in_class and positional:
            body += self._self_assignments(node.body, positional[0].arg)
        body += [
            statement
            for statement in self._body(node.body, in_class=False)
            if isinstance(statement, cst.ClassDef | cst.FunctionDef)
        ]
        body = body or [cst.SimpleStatementLine(body=[cst.Pass()])]
        return parsed.with_changes(body=cst.IndentedBlock(body=body))

    def _self_assignments(
        self, body: list[ast.stmt], self_name: str
    ) -> list[cst.SimpleStatementLine | cst.BaseCompoundStatement]:
        out: list[cst.SimpleStatementLine | cst.BaseCompoundStatement] = []
        for node in body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = (
                    node.targets if isinstance(node, ast.Assign) else [node.target]
                )
                if any(
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == self_name
                    for target in targets
                ):
                    out.append(self._statement(node))
                continue
            for name in ("body", "orelse", "handlers", "finalbody", "cases"):
                nested = getattr(node, name, None)
                if isinstance(nested, list):
                    for child in nested:
                        inner = (
                            child.body if not isinstance(child, ast.stmt) else [child]
                        )
                        out += self._self_assignments(inner, self_name)
        return out


def outline_diagnostics(
    source: bytes, context: FileContext
) -> tuple[str, str, list[Diagnostic]]:
    """(the decoded text, its encoding, the sorted diagnostics) of a file for
    which `needs_full_parse` is false. Raises `LookupError` when a diagnostic
    needs a position the outline does not have, and `libcst.ParserSyntaxError`
    for a statement libcst cannot parse: the caller parses the whole file."""
    encoding, _ = tokenize.detect_encoding(BytesIO(source).readline)
    text = source.decode(encoding)
    tree = ast.parse(text)
    outliner = _Outliner(text)
    module = outliner.module(tree)
    analysis = Analysis(None, ImportMap.from_module(module), context, False, False)
    analysis.known_positions.update(outliner.positions)
    analysis.walk_statements(module)
    return (
        text,
        "utf-8" if encoding == "utf-8-sig" else encoding,
        sorted(analysis.diagnostics),
    )
