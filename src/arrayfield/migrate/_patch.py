"""The unified diff `--diff` prints, in time linear in the file's length.

`difflib.unified_diff` finds matching blocks by repeatedly searching for the
longest one, which scans the whole remaining range each time: a generated file
of many alike classes, where a migration changes a line in every class, costs
it the square of the number of lines (a 5 MB file ran for more than ten
minutes). Here the lines that occur once in each version and keep their order
(the longest increasing run of them, as patience diff takes them) anchor the
match, and difflib only matches the short stretches between two anchors.
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
    """The lines of a unified diff from `old` to `new` (lines that keep their
    line ends), headed `--- old_name` and `+++ new_name`; nothing when they
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
                yield from (b" " + line for line in old[i1:i2])
                continue
            yield from (b"-" + line for line in old[i1:i2])
            yield from (b"+" + line for line in new[j1:j2])


class _AnchoredMatcher(difflib.SequenceMatcher):
    """difflib's grouping of changes into hunks (`get_grouped_opcodes`, which
    reads `get_opcodes`), over the opcodes of `opcodes`."""

    def __init__(self, old: Sequence[bytes], new: Sequence[bytes]) -> None:
        # Not given to difflib, which would index every line of `new` for a
        # matching this class does not use.
        super().__init__(None, (), ())
        self.old, self.new = old, new

    def get_opcodes(self) -> list[Opcode]:
        return opcodes(self.old, self.new)


def opcodes(old: Sequence[bytes], new: Sequence[bytes]) -> list[Opcode]:
    """How `old` becomes `new`, as `difflib.SequenceMatcher.get_opcodes`."""
    out: list[Opcode] = []
    i0 = j0 = 0
    for i, j in [*_anchors(old, new), (len(old), len(new))]:
        if i0 == i or j0 == j or (i - i0, j - j0) == (1, 1):
            # What difflib answers for these, without building a matcher: a
            # migration mostly changes one line between two unchanged ones.
            if i > i0 or j > j0:
                tag = "insert" if i0 == i else "delete" if j0 == j else "replace"
                if tag == "replace" and old[i0] == new[j0]:
                    tag = "equal"
                _append(out, (tag, i0, i, j0, j))
        else:
            between = difflib.SequenceMatcher(None, old[i0:i], new[j0:j])
            for tag, a1, a2, b1, b2 in between.get_opcodes():
                _append(out, (tag, i0 + a1, i0 + a2, j0 + b1, j0 + b2))
        if i < len(old):
            _append(out, ("equal", i, i + 1, j, j + 1))
        i0, j0 = i + 1, j + 1
    return out


def _append(out: list[Opcode], code: Opcode) -> None:
    """Add `code`, merged into the last one when both keep lines as they are."""
    if out and code[0] == "equal" and out[-1][0] == "equal":
        tag, i1, _, j1, _ = out[-1]
        out[-1] = (tag, i1, code[2], j1, code[4])
    else:
        out.append(code)


def _anchors(old: Sequence[bytes], new: Sequence[bytes]) -> list[tuple[int, int]]:
    """Pairs `(i, j)` with `old[i] == new[j]` a line that occurs once in each,
    increasing in both: the longest such chain of the lines unique to both."""
    count: dict[bytes, list[int]] = {}
    for index, line in enumerate(old):
        count.setdefault(line, [0, 0, index])[0] += 1
    for index, line in enumerate(new):
        entry = count.get(line)
        if entry is not None:
            entry[1] += 1
            entry[2:] = [entry[2], index]
    pairs = sorted(
        (entry[2], entry[3]) for entry in count.values() if entry[:2] == [1, 1]
    )
    # Longest increasing run of the new positions (patience sorting): `tops`
    # holds the smallest end of a run of each length, `before` each pair's
    # predecessor in the best run that ends with it.
    tops: list[int] = []
    top_pairs: list[int] = []
    before: list[int] = []
    for number, (_, j) in enumerate(pairs):
        length = bisect.bisect_left(tops, j)
        if length == len(tops):
            tops.append(j)
            top_pairs.append(number)
        else:
            tops[length] = j
            top_pairs[length] = number
        before.append(top_pairs[length - 1] if length else -1)
    chain = []
    number = top_pairs[-1] if top_pairs else -1
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
