"""The unified diff `--diff` prints, in time linear in the file's length.

difflib's matching costs the square of the number of lines on a generated file
of many alike classes (a 5 MB file ran for more than ten minutes). Here the
lines that occur once in each version and keep their order anchor the match
(as in patience diff), and difflib only matches the stretches between anchors.
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Iterator, Sequence

# (tag, old start, old end, new start, new end), as difflib's opcodes.
Opcode = tuple[str, int, int, int, int]

# Lines of unchanged text around each change, as `diff -u` and git print.
CONTEXT = 3


def unified_diff(
    old: Sequence[bytes], new: Sequence[bytes], old_name: bytes, new_name: bytes
) -> Iterator[bytes]:
    """The unified diff from `old` to `new` (lines that keep their line ends),
    headed `--- old_name` and `+++ new_name`, line by line; nothing when they
    are equal."""
    started = False
    for hunk in _AnchoredMatcher(old, new).get_grouped_opcodes(CONTEXT):
        if not started:
            yield b"--- " + old_name + b"\n"
            yield b"+++ " + new_name + b"\n"
            started = True
        first, last = hunk[0], hunk[-1]
        yield b"@@ -%s +%s @@\n" % (
            _range(first[1], last[2]),
            _range(first[3], last[4]),
        )
        for tag, i1, i2, j1, j2 in hunk:
            if tag == "equal":
                yield from (_line(b" ", line) for line in old[i1:i2])
                continue
            yield from (_line(b"-", line) for line in old[i1:i2])
            yield from (_line(b"+", line) for line in new[j1:j2])


def _line(prefix: bytes, line: bytes) -> bytes:
    if line.endswith(b"\n"):
        return prefix + line
    return prefix + line + b"\n\\ No newline at end of file\n"


class _AnchoredMatcher(difflib.SequenceMatcher):
    """difflib's grouping of changes into hunks, over the opcodes of `opcodes`."""

    def __init__(self, old: Sequence[bytes], new: Sequence[bytes]) -> None:
        # Not given to difflib, which would index every line of `new`.
        super().__init__(None, (), ())
        self.old, self.new = old, new

    def get_opcodes(self) -> list[Opcode]:
        return opcodes(self.old, self.new)


def opcodes(old: Sequence[bytes], new: Sequence[bytes]) -> list[Opcode]:
    """How `old` becomes `new`, as `difflib.SequenceMatcher.get_opcodes`: difflib
    matches each stretch between two anchors."""
    out: list[Opcode] = []
    i0 = j0 = 0
    for i, j in [*_anchors(old, new), (len(old), len(new))]:
        between = difflib.SequenceMatcher(None, old[i0:i], new[j0:j])
        for tag, a1, a2, b1, b2 in between.get_opcodes():
            _append(out, (tag, i0 + a1, i0 + a2, j0 + b1, j0 + b2))
        if i < len(old):
            _append(out, ("equal", i, i + 1, j, j + 1))
        i0, j0 = i + 1, j + 1
    return out


def _append(out: list[Opcode], code: Opcode) -> None:
    """Add `code`, merged into the last one when both keep lines as they are."""
    if out and code[0] == out[-1][0] == "equal":
        out[-1] = ("equal", out[-1][1], code[2], out[-1][3], code[4])
    else:
        out.append(code)


def _unique(lines: Sequence[bytes]) -> dict[bytes, int]:
    """Each line that occurs once in `lines`, and its index."""
    index: dict[bytes, int] = {}
    for number, line in enumerate(lines):
        index[line] = -1 if line in index else number
    return {line: number for line, number in index.items() if number >= 0}


def _anchors(old: Sequence[bytes], new: Sequence[bytes]) -> list[tuple[int, int]]:
    """The longest chain of pairs `(i, j)`, increasing in both, where `old[i]`
    and `new[j]` are the same line, one that occurs once in each."""
    in_new = _unique(new)
    # In the order of `old`: a line's first occurrence is its only one.
    pairs = [(i, in_new[line]) for line, i in _unique(old).items() if line in in_new]
    # Longest increasing run of the new positions (patience sorting): `tops`
    # holds the smallest end of a run of each length, `ends` the pair that
    # ends it, `before` each pair's predecessor in the best run that ends with it.
    tops: list[int] = []
    ends: list[int] = []
    before: list[int] = []
    for number, (_, j) in enumerate(pairs):
        length = bisect.bisect_left(tops, j)
        before.append(ends[length - 1] if length else -1)
        # Replaces the top of that length, or starts a longer run.
        tops[length : length + 1] = [j]
        ends[length : length + 1] = [number]
    chain = []
    number = ends[-1] if ends else -1
    while number >= 0:
        chain.append(pairs[number])
        number = before[number]
    return chain[::-1]


def _range(start: int, end: int) -> bytes:
    """A hunk header's range: `start,length` counted from 1, the start alone
    for one line, and the line before for none (as `diff -u` writes it)."""
    length = end - start
    if length == 1:
        return b"%d" % (start + 1)
    if length == 0:
        return b"%d,0" % start
    return b"%d,%d" % (start + 1, length)
