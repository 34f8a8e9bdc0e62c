"""A call's arguments as text: one dropped with the comments around it, one
added after the last.

The text between two arguments is a `_Gap`: spaces, or the rest of a line (a
comment may end it), whole lines, and the indentation of the next argument.
Where an argument goes, the gaps on either side of it become one: the layout
of one of them with the comments of both, none lost.
"""

from __future__ import annotations

import dataclasses
import re
import tokenize

from ._text import Token, tokens


@dataclasses.dataclass
class _Gap:
    """The text between two tokens inside brackets: spaces only (`lines` is
    empty), or the rest of a line (`first`, with its comment and line break),
    whole lines (each with any comment), and the spaces before the next token
    (`last`)."""

    first: str
    lines: list[str]
    last: str

    @classmethod
    def read(cls, text: str) -> _Gap:
        # Lines end as Python ends them (str.splitlines would also end one
        # at a form feed).
        parts = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)
        if len(parts) <= 1 or "\\" in text:
            return cls(text, [], "")
        return (
            cls(parts[0], parts[1:-1], parts[-1])
            if not parts[-1].endswith(("\n", "\r"))
            else cls(parts[0], parts[1:], "")
        )

    @property
    def broken(self) -> bool:
        return self.first.endswith(("\n", "\r"))

    @property
    def first_comment(self) -> str | None:
        if not self.broken:
            return None
        stripped = self.first.lstrip(" \t")
        return stripped.rstrip("\r\n") if stripped.startswith("#") else None

    @property
    def has_comment(self) -> bool:
        return self.broken and (
            self.first_comment is not None
            or any(line.lstrip(" \t").startswith("#") for line in self.lines)
        )

    def __str__(self) -> str:
        return self.first + "".join(self.lines) + self.last


def _joined(first: _Gap, second: _Gap, layout_of_second: bool, newline: str) -> str:
    """What replaces `first`, a dropped argument and `second`: the layout of
    one of them (the other if only it breaks the line), with the comments of
    both; the first comment stays at the end of its line, the others get lines
    of their own, indented as the arguments are."""
    layout = second if layout_of_second else first
    if not (first.has_comment or second.has_comment):
        return str(layout)
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


@dataclasses.dataclass
class _Item:
    """One element of a bracketed list (a call's arguments, an import's names):
    its span and the span of the comma after it, if any."""

    start: int
    end: int
    comma: tuple[int, int] | None

    @property
    def after(self) -> int:
        """Where the element ends, its comma included."""
        return self.end if self.comma is None else self.comma[1]


def _items(found: list[Token], opening: int) -> tuple[list[_Item], int]:
    """The elements between the bracket `found[opening]` and its match, and
    the offset of that closing bracket."""
    items: list[_Item] = []
    depth, start, end = 0, None, None
    for token in found[opening + 1 :]:
        if token.kind in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE):
            continue
        if depth == 0 and token.string in (",", ")"):
            if start is not None:
                assert end is not None
                comma = (token.start, token.end) if token.string == "," else None
                items.append(_Item(start, end, comma))
            start = end = None
            if token.string == ")":
                return items, token.start
            continue
        if token.string in "([{" and token.kind == tokenize.OP:
            depth += 1
        elif token.string in ")]}" and token.kind == tokenize.OP:
            depth -= 1
        if start is None:
            start = token.start
        end = token.end
    raise ValueError("no closing bracket")


def _bracket(found: list[Token], func_end: int) -> int:
    """The index of the call's opening bracket, the first `(` after its callee."""
    return next(
        i for i, t in enumerate(found) if t.start >= func_end and t.string == "("
    )


def without_keyword(text: str, func_end: int, keyword: str, newline: str) -> str:
    """A call's text (its callee ends at `func_end`) without its argument
    `keyword=...`; the comments around that argument stay, the first at the end
    of its line, others on lines of their own."""
    found = tokens(text)
    opening = _bracket(found, func_end)
    items, closing = _items(found, opening)
    index = next(
        i
        for i, item in enumerate(items)
        if re.match(rf"{keyword}\s*=", text[item.start : item.end])
    )
    removed = items[index]
    following = items[index + 1].start if index + 1 < len(items) else closing
    start = items[index - 1].after if index else found[opening].end
    gap = _Gap.read(text[start : removed.start])
    trailing = _Gap.read(text[removed.after : following])
    # The last argument: what follows it goes to the one before, which keeps
    # its comma only if the dropped one had one (a trailing comma).
    last = 0 < index == len(items) - 1
    if last and removed.comma is None:
        start = items[index - 1].end
    return text[:start] + _joined(gap, trailing, last, newline) + text[following:]


def with_keyword(
    text: str, callee: tuple[int, int], new_callee: str, argument: str
) -> str:
    """A call's text calling `new_callee` instead of the callee at `callee`
    (its start and end), with `argument` added after its last argument (and
    that one's comma): a comment after the last argument stays at the end of
    its line."""
    found = tokens(text)
    opening = _bracket(found, callee[1])
    items, _ = _items(found, opening)
    if not items:
        at, added = found[opening].end, argument
    else:
        at = items[-1].after
        added = ", " + argument if items[-1].comma is None else f" {argument},"
    return text[: callee[0]] + new_callee + text[callee[1] : at] + added + text[at:]
