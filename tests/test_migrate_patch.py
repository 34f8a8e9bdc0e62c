"""`--diff` on a large generated file (issue 30): difflib's matching took the
square of the number of lines on a file of many alike classes (a 5 MB file ran
for more than ten minutes); `_patch` anchors on the lines unique to both
versions, so its work grows with the length of the file.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from arrayfield.migrate._patch import opcodes, unified_diff
from helpers import run_cli

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from migrate_tree import generated_module as _classes


class CountedLine(bytes):
    """A line that counts how often it is hashed: each dict lookup of a line
    (the unit of a line matcher's work) hashes it once."""

    lookups = 0

    def __hash__(self) -> int:
        CountedLine.lookups += 1
        return bytes.__hash__(self)


def _lines(text: str) -> list[bytes]:
    return [CountedLine(line) for line in text.encode().splitlines(keepends=True)]


def test_the_work_of_a_diff_grows_linearly_with_the_file():
    lookups = []
    for count in (200, 400, 800):
        old = _classes(count)
        new = old.replace("(eqx.Module)", "(af.ArrayModule)")  # one line a class
        CountedLine.lookups = 0
        hunks = list(unified_diff(_lines(old), _lines(new), b"a/m.py", b"b/m.py"))
        lookups.append(CountedLine.lookups)
        assert sum(line.startswith(b"@@") for line in hunks) == count
    assert lookups[1] <= 2.05 * lookups[0]
    assert lookups[2] <= 2.05 * lookups[1]


def _rebuilt(old: list[bytes], new: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    for tag, i1, i2, j1, j2 in opcodes(old, new):
        if tag == "equal":
            assert old[i1:i2] == new[j1:j2]
        out += old[i1:i2] if tag == "equal" else new[j1:j2]
    return out


def test_the_opcodes_turn_the_old_lines_into_the_new():
    choices = [b"a\n", b"b\n", b"\n", *(b"x%d\n" % n for n in range(20))]
    generator = random.Random(30)
    for _ in range(500):
        old = generator.choices(choices, k=generator.randint(0, 30))
        new = list(old)
        for _ in range(generator.randint(0, 5)):
            where = generator.randint(0, len(new))
            new[where : where + generator.randint(0, 2)] = generator.choices(
                choices, k=generator.randint(0, 2)
            )
        assert _rebuilt(old, new) == new


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_diff_of_a_generated_file_applies_to_what_fix_writes(tmp_path):
    previewed, written = tmp_path / "previewed", tmp_path / "written"
    for root in (previewed, written):
        root.mkdir()
        (root / "layers.py").write_text(_classes(300))
    diff = subprocess.run(
        [sys.executable, "-m", "arrayfield", "migrate", "--diff", "."],
        capture_output=True,
        cwd=previewed,
        timeout=300,
    )
    assert diff.returncode == 1, diff.stderr
    applied = subprocess.run(
        ["git", "apply", "-"], input=diff.stdout, capture_output=True, cwd=previewed
    )
    assert applied.returncode == 0, applied.stderr
    assert run_cli("migrate", ".", cwd=written).returncode == 0
    assert (previewed / "layers.py").read_bytes() == (
        written / "layers.py"
    ).read_bytes()
