"""A call's arguments as text: one dropped, the comments around it kept, or
one added after the last.

Where an argument goes, the `_Gap`s either side of it become one: the layout
of one of them with the comments of both.
"""

from __future__ import annotations

import re
import tokenize
from typing import NamedTuple

from ._text import tokens


class _Gap(NamedTuple):
    """The text between two tokens in brackets: the rest of a line (with its
    comment), whole lines, the spaces before the next token; or spaces only."""

    first: str
    lines: list[str]
    last: str

    @property
    def broken(self) -> bool:
        return self.first.endswith(("\n", "\r"))

    @property
    def first_comment(self) -> str | None:
        """The comment ending the first line of a broken gap."""
        stripped = self.first.lstrip(" \t")
        return stripped.rstrip("\r\n") if stripped.startswith("#") else None

    @property
    def has_comment(self) -> bool:
        parts = (self.first, *self.lines)
        return self.broken and any(p.lstrip(" \t").startswith("#") for p in parts)


def _gap(text: str) -> _Gap:
    # Lines end as Python ends them (str.splitlines also ends one at a form feed).
    parts = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)
    if len(parts) <= 1 or "\\" in text:
        return _Gap(text, [], "")
    if parts[-1].endswith(("\n", "\r")):
        parts.append("")
    return _Gap(parts[0], parts[1:-1], parts[-1])


def _joined(first: _Gap, second: _Gap, layout_of_second: bool, newline: str) -> str:
    """What replaces `first`, a dropped argument and `second`: the layout of one
    (one that breaks the line), the comments of both, the first at a line's end."""
    layout = second if layout_of_second else first
    if not (first.has_comment or second.has_comment):
        return layout.first + "".join(layout.lines) + layout.last
    broken = [gap for gap in (first, second) if gap.broken]
    if not layout.broken:
        layout = broken[0]  # a comment ends its line: keep a line break
    head: str | None = None
    lines: list[str] = []
    for gap in broken:
        comment = gap.first_comment
        if comment is not None and head is None:
            head = gap.first
        elif comment is not None:
            lines.append(broken[0].last + comment + newline)
        lines.extend(gap.lines)
    return (head or layout.first) + "".join(lines) + layout.last


class _Item(NamedTuple):
    """An argument's span, and where its comma (if any) ends."""

    start: int
    end: int
    after: int


def _arguments(text: str, func_end: int) -> tuple[int, list[_Item], int]:
    """Where the call's brackets open and close, and the arguments between."""
    found = tokens(text)
    opening = next(
        i for i, t in enumerate(found) if t.start >= func_end and t.string == "("
    )
    items: list[_Item] = []
    depth, start, end = 0, None, None
    for token in found[opening + 1 :]:
        if token.kind in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE):
            continue
        if depth == 0 and token.string in (",", ")"):
            if start is not None and end is not None:
                items.append(
                    _Item(start, end, token.end if token.string == "," else end)
                )
            if token.string == ")":
                return found[opening].end, items, token.start
            start = end = None
            continue
        if token.kind == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.kind == tokenize.OP and token.string in ")]}":
            depth -= 1
        if start is None:
            start = token.start
        end = token.end
    raise ValueError("no closing bracket")


def without_keyword(text: str, func_end: int, keyword: str, newline: str) -> str:
    """A call's text (its callee ends at `func_end`) without `keyword=...`; the
    comments around it stay."""
    opened, items, closing = _arguments(text, func_end)
    index = next(
        i
        for i, item in enumerate(items)
        if re.match(rf"{keyword}\s*=", text[item.start : item.end])
    )
    removed = items[index]
    following = items[index + 1].start if index + 1 < len(items) else closing
    start = items[index - 1].after if index else opened
    gap = _gap(text[start : removed.start])
    trailing = _gap(text[removed.after : following])
    # The last argument: what follows it goes to the one before, which keeps
    # its comma only if the dropped one had one (a trailing comma).
    last = 0 < index == len(items) - 1
    if last and removed.after == removed.end:
        start = items[index - 1].end
    return text[:start] + _joined(gap, trailing, last, newline) + text[following:]


def with_keyword(
    text: str, callee: tuple[int, int], new_callee: str, argument: str
) -> str:
    """A call's text calling `new_callee` instead of the callee at `callee`
    (start, end), with `argument` added after the last argument and its comma."""
    opened, items, _ = _arguments(text, callee[1])
    if not items:
        at, added = opened, argument
    else:
        at = items[-1].after
        added = ", " + argument if items[-1].after == items[-1].end else f" {argument},"
    return text[: callee[0]] + new_callee + text[callee[1] : at] + added + text[at:]
