"""A file's text at `ast` positions, and edits to it.

`ast` columns count UTF-8 bytes, so the writers (`_splice`, `_imports`) edit
bytes; the tokenizer tells them where commas, brackets and comments are.
"""

from __future__ import annotations

import ast
import io
import itertools
import re
import tokenize
from typing import NamedTuple


class Source:
    """A file's UTF-8 bytes (`lines` split as bytes.splitlines splits them), with
    the offsets of `ast`'s (line, column) positions."""

    def __init__(self, lines: list[bytes]) -> None:
        self.lines = lines
        self.data = b"".join(lines)
        self.starts = list(itertools.accumulate(map(len, lines), initial=0))

    def line_start(self, line: int) -> int:
        return self.starts[line - 1]

    def after_last_line(self, node: ast.AST) -> int:
        """The offset after the node's last line, its line break included."""
        return self.starts[node.end_lineno]  # type: ignore[attr-defined]

    def start(self, node: ast.AST) -> int:
        return self.starts[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].decode("utf-8")

    def before(self, statement: ast.stmt) -> bytes:
        """What comes before the statement on its first line."""
        return self.lines[statement.lineno - 1][: statement.col_offset]

    def line_tail(self, statement: ast.stmt) -> tuple[int, int, bool]:
        """Where the statement and its last line end; whether a comment is between."""
        last = statement.end_lineno or statement.lineno
        end = self.line_start(last) + len(self.lines[last - 1].rstrip(b"\r\n"))
        return self.end(statement), end, b"#" in self.data[self.end(statement) : end]

    def alone(self, statement: ast.stmt) -> bool:
        """Whether nothing but the statement (and a comment) is on its lines."""
        last = self.lines[statement.end_lineno - 1]  # type: ignore[index]
        after = last[statement.end_col_offset :].strip()  # type: ignore[misc]
        return not self.before(statement).strip() and after[:1] in (b"", b"#")


def first_line(statement: ast.stmt) -> int:
    """The statement's first line, its decorators' included."""
    decorators = getattr(statement, "decorator_list", None) or []
    return min([statement.lineno, *(d.lineno for d in decorators)])


class Edits:
    """Replacements of spans of a `Source`'s bytes, made all at once."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.spans: list[tuple[int, int, bytes]] = []

    def add(self, start: int, end: int, code: str) -> int:
        """Put `code` in place of the bytes from `start` to `end`; its index."""
        self.spans.append((start, end, code.encode("utf-8")))
        return len(self.spans) - 1

    def replace(self, index: int, code: str) -> None:
        start, end, _ = self.spans[index]
        self.spans[index] = (start, end, code.encode("utf-8"))

    def apply(self) -> str:
        """The text with every edit made (insertions before a replacement there)."""
        data = self.source.data
        out, done = [], 0
        for start, end, new in sorted(self.spans, key=lambda edit: edit[:2]):
            if start < done:
                raise AssertionError("two edits of one file overlap")
            out += [data[done:start], new]
            done = end
        out.append(data[done:])
        return b"".join(out).decode("utf-8")


class Token(NamedTuple):
    kind: int
    string: str
    start: int  # offsets into the text tokenized
    end: int


def tokens(text: str) -> list[Token]:
    """The tokens of a piece of code (comments and line breaks too), with offsets."""
    # Offsets of the lines as the tokenizer reads them (split at "\n" only).
    starts = [0] + [found.end() for found in re.finditer("\n", text)]

    def offset(row: int, col: int) -> int:
        return starts[row - 1] + col if row <= len(starts) else len(text)

    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.ENDMARKER, tokenize.DEDENT, tokenize.INDENT):
                continue
            start, end = offset(*token.start), offset(*token.end)
            found.append(Token(token.type, token.string, start, end))
    except (tokenize.TokenError, SyntaxError):
        pass  # the end of an unterminated piece: what came before is read
    return found


def comments(text: str) -> list[str]:
    """The comments in a piece of code, in order."""
    return [t.string for t in tokens(text) if t.kind == tokenize.COMMENT]
