"""The layers fail apart: with any of the private JAX and equinox modules that
arrayfield reads hidden from arrayfield alone, the fields stay exact,
`af.filter_jit` gives `eqx.filter_jit`'s values and trace counts, and the
diagnostics run, each capability that lost something saying so once.

Each case runs `hidden_names_program.py` in its own process: the reference run
hides nothing and records which private modules arrayfield imports (so a new
private read is covered the day it is added); then each of those alone, and
all at once.
"""

import concurrent.futures
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from arrayfield import _eqx_private, _jax_private

PROGRAM = Path(__file__).with_name("hidden_names_program.py")
ARCHITECTURE = Path(__file__).parents[1] / "docs" / "architecture.md"


def _run(hidden: list[str]) -> dict:
    env = {**os.environ, "AF_HIDE": json.dumps(hidden), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, str(PROGRAM)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, f"hiding {hidden}:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.splitlines()[-1])


@functools.cache
def _reference() -> dict:
    return _run([])


def _capability(warning: str) -> str:
    # "CompatibilityWarning: af.filter_jit runs as ..." -> "af.filter_jit"
    return warning.split(": ", 1)[1].split(" ", 1)[0]


def test_each_private_module_hidden_alone_and_all_at_once():
    reference = _reference()
    modules = reference["imported"]
    # What dispatch and diagnostics read today; a module that stops being read
    # drops out of this list, and one newly read joins it, with no edit here.
    assert any(m.startswith("jax._src") for m in modules), modules
    assert any(m.startswith("equinox._") for m in modules), modules
    assert reference["warnings"] == []
    cases = [[m] for m in modules] + [["*"]]
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(map(tuple, cases), pool.map(_run, cases), strict=True))
    for hidden, got in results.items():
        where = f"hiding {list(hidden)}"
        # The fields need nothing private: exact.
        assert got["fields"] == reference["fields"], where
        assert got["bad input"] == reference["bad input"], where
        assert got["normalize"] == reference["normalize"], where
        # af.filter_jit gives eqx.filter_jit's values and trace counts.
        expected = reference["jit"]["eqx"]
        assert got["jit"]["eqx"] == expected, where
        assert got["jit"]["af"] == got["jit"]["af numbers"] == expected, where
        assert got["audit"] == reference["audit"], where
        # At most one warning per capability, and a diagnostic that saw less
        # than the reference says so.
        capabilities = [_capability(w) for w in got["warnings"]]
        assert len(capabilities) == len(set(capabilities)), (where, got["warnings"])
        if got["retrace warnings"] != reference["retrace warnings"]:
            assert "af.explain_retraces" in capabilities, (where, got["warnings"])
        assert got["imported"] == [] or "*" not in hidden, where
    everything = results[("*",)]
    assert {_capability(w) for w in everything["warnings"]} == {
        "af.filter_jit",
        "af.explain_retraces",
    }


def _table_rows() -> list[list[str]]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    table = text[text.index("| name | accessor | why | probe") :]
    rows = []
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_the_architecture_table_lists_every_private_module_and_accessor():
    rows = _table_rows()
    named = " ".join(row[0] for row in rows)
    for module in _reference()["imported"]:
        assert f"`{module}." in named or f"`{module}`" in named, module
    rooms = {"_jax_private": _jax_private, "_eqx_private": _eqx_private}
    for name, accessor, *_ in rows:
        room, _, names = accessor.partition(":")
        room = room.strip("` ")
        targets = re.findall(r"`(\w+)`", names) or [room.partition(".")[2]]
        room = room.partition(".")[0]
        assert room in rooms, (name, accessor)
        for target in targets:
            assert hasattr(rooms[room], target), (name, f"{room}.{target}")
