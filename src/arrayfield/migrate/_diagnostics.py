"""What the codemod reports when a field needs a human decision, and `# noqa`.

The codes, their summaries and their messages live in `_checks`, one module
per code.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class Diagnostic(NamedTuple):
    """A place in a source file that the codemod cannot decide about; `line`
    and `col` count from 1, as ruff and flake8 count them."""

    line: int
    col: int
    code: str
    message: str
    # Whether `arrayfield migrate --fix` makes the edit the message asks for.
    fixable: bool = False
    # Whether `--fix` would need to decide it and cannot (exit status 3).
    undecided: bool = False

    def format(self, path: str) -> str:
        return f"{path}:{self.line}:{self.col}: {self.code} {self.message}"


# A bare no-qa comment, or one naming codes (any case, as flake8 and ruff accept).
_NOQA = re.compile(
    r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE
)
# Python's line breaks: str.splitlines also breaks at form feeds and others,
# which Python and patch(1) take as part of a line.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def source_lines(source: str) -> list[str]:
    """The lines of a source file, numbered as Python numbers them."""
    if "\r" not in source:  # str.split is 5x faster than the regex
        return source.split("\n")
    return _LINE_BREAK.split(source)


def suppressed(lines: list[str], line: int, code: str) -> bool:
    """Whether a `# noqa` comment on `line` (1-based) silences `code`."""
    if not 0 < line <= len(lines):
        return False
    match = _NOQA.search(lines[line - 1])
    if match is None:
        return False
    codes = match.group("codes")
    return codes is None or code in re.split(r"[,\s]+", codes.strip().upper())
