"""Many fields, one compile: K fields fitted one after another under each jit.

The fields come from `tests/many_fields` (modelled on scarlet2: one scene per field
of the sky, as the job builds it, with identity-compared priors, a WCS and an
`id`-derived name). Each field runs `steps` optax steps; the first step of a
field is timed apart from the others, so a field's time splits into compile
(first call minus a step) and steps. Every jit traces once per field (each is a
new cache key); under `eqx.filter_jit` and `jax.jit` (the scene partitioned, its
static part a static argument) every field also compiles again, while under
`af.filter_jit` each later trace is the first field's program, so one compile
serves all K fields. Compiles are XLA compiles, counted by JAX's events.

`persistent_cache` runs each fit in two fresh processes sharing a JAX
compilation cache directory (`jax_compilation_cache_dir`,
`jax_persistent_cache_min_compile_time_secs=0`) and reports what the second
process saves and what the first pays to write it.

`run.py` adds `rows(...)` to its summary, publishes `fields_table` and
`cache_table` (docs/many_fields.md) and the raw figures `publish.py` plots;
`python benchmarks/field_compiles.py [--quick]` prints the rows alone.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the fixture package

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.tree_util as jtu  # noqa: E402

import arrayfield as af  # noqa: E402
from many_fields import NO_FIXES, fit_fields  # noqa: E402  # pyright: ignore


def jax_jit(fun: Callable[..., Any]) -> Callable[..., Any]:
    """`jax.jit` as one writes it by hand for a scene with non-array leaves: the
    arrays traced, the rest `(leaves, treedef)` as a static argument, and the
    step's scene (same structure) rebuilt from its arrays and the input's rest."""

    def on_parts(arrays: Any, static: tuple, *rest: Any) -> Any:
        leaves, treedef = static
        scene = eqx.combine(arrays, jtu.tree_unflatten(treedef, list(leaves)))
        out_scene, *out_rest = fun(scene, *rest)
        return eqx.filter(out_scene, eqx.is_array), *out_rest

    # Named after the step, so that its compiles are counted as the step's.
    on_parts.__name__ = on_parts.__qualname__ = fun.__name__
    jitted = jax.jit(on_parts, static_argnums=1)

    def call(scene: Any, *rest: Any) -> Any:
        arrays, others = eqx.partition(scene, eqx.is_array)
        leaves, treedef = jtu.tree_flatten(others)
        out_arrays, *out_rest = jitted(arrays, (tuple(leaves), treedef), *rest)
        return eqx.combine(out_arrays, others), *out_rest

    return call


JITS: dict[str, Callable[..., Any]] = {
    "af.filter_jit": af.filter_jit,
    "eqx.filter_jit": eqx.filter_jit,
    "jax.jit": jax_jit,
}


def measure(fields: int, steps: int) -> list[dict[str, Any]]:
    """Per jit: compiles, and per-field medians of wall, compile and step time."""
    found = []
    for name, jit in JITS.items():
        started = time.perf_counter()
        jax.clear_caches()  # each jit starts cold (af.filter_jit's programs too)
        runs, traces, compiles = fit_fields(jit, fields, steps, NO_FIXES)
        wall = time.perf_counter() - started
        compile_s = [max(r.first_call_s - r.step_s, 0.0) for r in runs]
        found.append(
            {
                "jit": name,
                "fields": fields,
                "steps": steps,
                "traces": traces,
                "compiles": compiles,
                "total_s": wall,
                "first_field_s": runs[0].total_s,
                "later_field_s": statistics.median(r.total_s for r in runs[1:]),
                "compile_s": sum(compile_s),
                "step_ms": statistics.median(r.step_s for r in runs) * 1e3,
                "losses": [r.losses[-1] for r in runs],
            }
        )
    return found


# -- the persistent compilation cache, across two processes -------------------------

_CHILD = """
import json, os, sys, time
start = time.perf_counter()
import jax
if sys.argv[2]:
    jax.config.update("jax_compilation_cache_dir", sys.argv[2])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
sys.path.insert(0, sys.argv[5])
import field_compiles as bench
imported = time.perf_counter()
runs, traces, _compiles = bench.fit_fields(bench.JITS[sys.argv[1]], int(sys.argv[3]),
                                int(sys.argv[4]), bench.NO_FIXES)
print(json.dumps({"fit_s": time.perf_counter() - imported,
                  "process_s": time.perf_counter() - start, "traces": traces,
                  "first_field_s": runs[0].total_s,
                  "losses": [r.losses[-1] for r in runs]}))
"""


def _child(jit: str, cache: str, fields: int, steps: int) -> dict[str, Any]:
    """One fit in a fresh process (with the cache directory `cache`, if any)."""
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, jit, cache, str(fields), str(steps), str(HERE)],
        capture_output=True,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def persistent_cache(fields: int, steps: int) -> list[dict[str, Any]]:
    """Per jit: a process without the cache, then two processes sharing one."""
    found = []
    for jit in ("af.filter_jit", "eqx.filter_jit"):
        plain = _child(jit, "", fields, steps)
        with tempfile.TemporaryDirectory() as cache:
            first = _child(jit, cache, fields, steps)
            written = _size(Path(cache))
            second = _child(jit, cache, fields, steps)
        same = plain["losses"] == first["losses"] == second["losses"]
        found.append(
            {
                "jit": jit,
                "fields": fields,
                "steps": steps,
                "traces": [plain["traces"], first["traces"], second["traces"]],
                "no_cache_s": plain["fit_s"],
                "first_process_s": first["fit_s"],
                "second_process_s": second["fit_s"],
                "cache_bytes": written,
                "same_results": same,
            }
        )
    return found


# -- report -------------------------------------------------------------------------


def sizes(quick: bool) -> tuple[int, int]:
    """(fields, steps per field)."""
    return (3, 5) if quick else (8, 50)


def rows(measured: list[dict[str, Any]], cache: list[dict[str, Any]]) -> list[dict]:
    """Table rows: case, baseline, arrayfield, ratio, target, status ("FAIL" for a
    wrong trace count)."""
    by = {m["jit"]: m for m in measured}
    a, e, j = by["af.filter_jit"], by["eqx.filter_jit"], by["jax.jit"]
    k, steps = a["fields"], a["steps"]
    same = a["losses"] == e["losses"] == j["losses"]
    found = [
        {
            "case": f"many fields: compiles for {k} fields ({steps} steps each)",
            "baseline": f"eqx.filter_jit {e['compiles']}, jax.jit {j['compiles']}",
            "arrayfield": str(a["compiles"]),
            "ratio": "",
            "target": f"exactly 1 (eqx, jax: {k}); {k} traces each; results equal",
            "status": "pass"
            if (a["compiles"], e["compiles"], j["compiles"]) == (1, k, k)
            and a["traces"] == e["traces"] == k
            and same
            else "FAIL",
        },
        {
            "case": f"many fields: wall time per field (s), mean of {k}",
            "baseline": f"eqx.filter_jit {e['total_s'] / k:.3f}, "
            f"jax.jit {j['total_s'] / k:.3f}",
            "arrayfield": f"{a['total_s'] / k:.3f}",
            "ratio": f"{a['total_s'] / e['total_s']:.2f}x eqx",
            "target": "report",
            "status": "info",
        },
        {
            "case": "many fields: wall time (s) of the first field, then the "
            "median later field",
            "baseline": f"eqx.filter_jit {e['first_field_s']:.3f}, "
            f"{e['later_field_s']:.3f}; jax.jit {j['first_field_s']:.3f}, "
            f"{j['later_field_s']:.3f}",
            "arrayfield": f"{a['first_field_s']:.3f}, {a['later_field_s']:.3f}",
            "ratio": f"{a['later_field_s'] / e['later_field_s']:.3f}x eqx (later)",
            "target": "report",
            "status": "info",
        },
        {
            "case": f"many fields: compile time, all {k} fields (s)",
            "baseline": f"eqx.filter_jit {e['compile_s']:.2f}, "
            f"jax.jit {j['compile_s']:.2f}",
            "arrayfield": f"{a['compile_s']:.2f}",
            "ratio": f"{a['compile_s'] / e['compile_s']:.2f}x eqx",
            "target": "report",
            "status": "info",
        },
        {
            "case": "many fields: median step (ms), warm",
            "baseline": f"eqx.filter_jit {e['step_ms']:.2f}, "
            f"jax.jit {j['step_ms']:.2f}",
            "arrayfield": f"{a['step_ms']:.2f}",
            "ratio": f"{a['step_ms'] / e['step_ms']:.2f}x eqx",
            "target": "report",
            "status": "info",
        },
    ]
    for c in cache:
        found.append(
            {
                "case": f"persistent compilation cache, {c['jit']}, {c['fields']} "
                "fields: fit time per process (s)",
                "baseline": f"no cache {c['no_cache_s']:.2f}",
                "arrayfield": f"first {c['first_process_s']:.2f}, "
                f"second {c['second_process_s']:.2f}",
                "ratio": f"{c['second_process_s'] / c['no_cache_s']:.2f}x second",
                "target": f"report ({c['cache_bytes'] / 1024:.0f} KiB written; "
                f"traces {c['traces']})",
                "status": "info" if c["same_results"] else "FAIL",
            }
        )
    return found


def markdown(found: list[dict]) -> str:
    keys = ["case", "baseline", "arrayfield", "ratio", "target", "status"]
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(row[k]) for k in keys) + " |" for row in found]
    return "\n".join(lines)


def fields_table(measured: list[dict[str, Any]]) -> tuple[list[str], list, str]:
    """The page's table: one column per jit, one row per figure."""
    k, steps = measured[0]["fields"], measured[0]["steps"]
    columns = ["", *(f"`{m['jit']}`" for m in measured)]
    lines = [
        (f"XLA compiles for {k} fields", lambda m: str(m["compiles"])),
        (f"traces for {k} fields", lambda m: str(m["traces"])),
        (f"compile time, all {k} fields (s)", lambda m: f"{m['compile_s']:.2f}"),
        (
            f"first field (compile + {steps} steps, s)",
            lambda m: f"{m['first_field_s']:.3f}",
        ),
        ("each later field (median, s)", lambda m: f"{m['later_field_s']:.3f}"),
        (f"wall time per field (s), mean of {k}", lambda m: f"{m['total_s'] / k:.3f}"),
        ("one warm step (median, ms)", lambda m: f"{m['step_ms']:.2f}"),
    ]
    rows = [[label, *(cell(m) for m in measured)] for label, cell in lines]
    caption = (
        f"{k} fields of `tests/many_fields`, {steps} optax steps each, all three "
        "fixes applied, one process; `jax.jit` is the hand-partitioned form."
    )
    return columns, rows, caption


def cache_table(cache: list[dict[str, Any]]) -> tuple[list[str], list, str]:
    """Fit time per fresh process, without the cache and with it (written, read)."""
    columns = [
        "",
        "no cache (s)",
        "first process, writes (s)",
        "second process, reads (s)",
        "second / no cache",
        "written",
    ]
    rows = [
        [
            f"`{c['jit']}` ({c['traces'][0]} trace{'s' if c['traces'][0] != 1 else ''}"
            " per process)",
            f"{c['no_cache_s']:.2f}",
            f"{c['first_process_s']:.2f}",
            f"{c['second_process_s']:.2f}",
            f"{c['second_process_s'] / c['no_cache_s']:.2f}x",
            f"{c['cache_bytes'] / 1024:.0f} KiB",
        ]
        for c in cache
    ]
    k = cache[0]["fields"] if cache else 0
    same = all(c["same_results"] for c in cache)
    caption = (
        f"The same {k}-field fit, each line three fresh processes (interpreter "
        "start and imports not counted); results "
        + ("equal in all of them." if same else "NOT equal across them.")
    )
    return columns, rows, caption


def main(quick: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The in-process measurement and the persistent-cache one."""
    fields, steps = sizes(quick)
    return measure(fields, steps), persistent_cache(fields, steps)


if __name__ == "__main__":
    measured, cache = main("--quick" in sys.argv[1:])
    print(markdown(rows(measured, cache)))
