"""arrayfield's performance targets, each measured against its baseline.

Run `python benchmarks/run.py` for the full suite or `--quick` for a smoke run
(under a minute). Every timing compares arrayfield with its baseline in one process,
interleaved round by round, and reports medians: timings are reported, never
asserted. Trace counts are exact: if one is wrong the script exits with status 1.
`dispatch.py` adds the per-step cost of `af.filter_jit` (issue 13), and
`field_compiles.py` K fields of a sky-fitting job under the three jits, with
JAX's persistent compilation cache across processes (issue 20),
`field_numbers.py` fields whose sources sit at other origins with numbers shared
(issue 28), `first_call.py` a step's first call in a fresh process, from the
persistent cache and from an export (issue 51), and
`migrate_tree.py` `arrayfield migrate --check` against `ruff check` (issue 21).

Every number arrayfield publishes comes from the one file a run writes:
`benchmarks/results/results.json` (a full run; `--quick` writes
`results_quick.json` beside it, which is not kept). A full run then calls
`publish.py`, which rewrites the marked blocks (`<!-- results:NAME -->`) of the
README and the docs pages and draws the plots from that file.

To add a case: write one function decorated with `@case` that measures and adds
its rows to the summary table (and, if it has one, its own table under a name),
then put `<!-- results:NAME -->` `<!-- /results -->` where the table belongs.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gc
import importlib
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

import arrayfield as af

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
RESULTS_FILE = RESULTS / "results.json"
QUICK_RESULTS_FILE = RESULTS / "results_quick.json"


@dataclasses.dataclass
class Row:
    case: str
    baseline: str
    arrayfield: str
    ratio: str
    target: str
    status: str  # "pass", "MISS", "FAIL" (trace count: exits 1), "info" or not judged


@dataclasses.dataclass
class Table:
    """A published table: its cells as they are printed, and a line under it."""

    columns: list[str]
    rows: list[list[str]]
    caption: str = ""


@dataclasses.dataclass
class Results:
    """What one run measured; `results.json` is this, as JSON."""

    quick: bool
    rows: list[Row] = dataclasses.field(default_factory=list)  # the summary table
    tables: dict[str, Table] = dataclasses.field(default_factory=dict)
    raw: dict[str, Any] = dataclasses.field(default_factory=dict)  # for the plots
    traces_ok: bool = True


CASES: list[Callable[[Results], None]] = []


def _case_name(measure: Callable[[Results], None]) -> str:
    return measure.__name__.removesuffix("_case")


def case(measure: Callable[[Results], None]) -> Callable[[Results], None]:
    """Register a benchmark case; cases run in the order they are defined."""
    CASES.append(measure)
    return measure


def _sibling(name: str) -> types.ModuleType:
    """A module of benchmarks/ (the scripts import each other by plain name)."""
    sys.path.insert(0, str(HERE))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(HERE))


# -- timing helpers ------------------------------------------------------------


def _per_call_us(function: Callable[[], Any], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        function()
    return (time.perf_counter() - start) / number * 1e6


def compare(
    baseline: Callable[[], Any],
    candidate: Callable[[], Any],
    *,
    number: int,
    rounds: int,
) -> tuple[float, float, float]:
    """Median us per call of each, and the median of the per-round ratios.

    Rounds alternate which side goes first, so drift (thermal, a neighbour on the
    shared cores) hits both sides alike; the ratio is paired round by round.
    """
    for _ in range(max(1, number // 10)):  # warm caches, compile once
        baseline()
        candidate()
    base_times, cand_times, ratios = [], [], []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            if r % 2:
                c = _per_call_us(candidate, number)
                b = _per_call_us(baseline, number)
            else:
                b = _per_call_us(baseline, number)
                c = _per_call_us(candidate, number)
            base_times.append(b)
            cand_times.append(c)
            ratios.append(c / b)
    finally:
        if gc_was_enabled:
            gc.enable()
    return (
        statistics.median(base_times),
        statistics.median(cand_times),
        statistics.median(ratios),
    )


def _status(ok: bool, quick: bool) -> str:
    # A quick run's few rounds on a loaded machine swing across a target's line:
    # it reports timings but does not judge them.
    if quick:
        return "not judged in quick mode"
    return "pass" if ok else "MISS"


# -- 1. the seed loop ----------------------------------------------------------


class IntScene(eqx.Module):
    """The issue's reproduction: a Python int in a plain Module (recompiles)."""

    x: Any


class ArrayScene(eqx.Module):
    """The fix users write by hand: a converter that wraps the value in an array."""

    x: Array = eqx.field(converter=jnp.asarray)


class AfScene(af.ArrayModule):
    """The same scene on ArrayModule: `0` becomes a strong int32 array."""

    x: Int[Array, ""]


SEED_VARIANTS: dict[str, Callable[[], eqx.Module]] = {
    "int": lambda: IntScene(0),
    "array": lambda: ArrayScene(0),
    "arraymodule": lambda: AfScene(0),
}
SEED_LABELS = {
    "int": "`eqx.Module`, `x = 0`",
    "array": "`eqx.Module`, hand fix `eqx.field(converter=jnp.asarray)`",
    "arraymodule": "`af.ArrayModule`, `x = 0`",
}


@dataclasses.dataclass
class SeedRun:
    traces: int
    cumulative_s: list[float]  # wall time after each step, first step included
    scene: Any  # the final scene, to check the counter really counted
    step: Callable[[Any, Any], Any]  # the jitted step, for further timing
    warm_us: float = math.nan  # us per warm step, timed beside the hand fix
    warm_ratio: float = math.nan  # median per-round ratio to the hand fix


def make_step() -> tuple[Callable[[Any, Any], Any], list[int]]:
    """A fresh `filter_jit` step (its own cache) and its trace counter."""
    traces = [0]

    @eqx.filter_jit
    def step(scene, increment):
        traces[0] += 1  # runs only while tracing
        return jax.tree_util.tree_map(lambda s: s + increment, scene)

    return step, traces


def seed_loop(variant: str, steps: int) -> SeedRun:
    """Run the seed loop (`scene = step(scene, 1)`) `steps` times from a fresh cache."""
    step, traces = make_step()
    scene = SEED_VARIANTS[variant]()
    cumulative = []
    start = time.perf_counter()
    for _ in range(steps):
        scene = step(scene, 1)
        jax.block_until_ready(scene)  # a step's time is its own, compile included
        cumulative.append(time.perf_counter() - start)
    return SeedRun(traces[0], cumulative, scene, step)


def later_step_us(run: SeedRun) -> float:
    """Median time of the steps after the first (which traces and compiles)."""
    times = run.cumulative_s
    return statistics.median(b - a for a, b in itertools.pairwise(times)) * 1e6


def bench_seed_loop(quick: bool) -> tuple[list[Row], dict[str, SeedRun], bool]:
    steps = 300 if quick else 3000
    int_steps = 30 if quick else 150
    # JAX's own first-use costs, so that no variant's first step carries them.
    jax.block_until_ready(jax.jit(lambda v: v + 1)(0))
    runs = {
        "int": seed_loop("int", int_steps),
        "array": seed_loop("array", steps),
        "arraymodule": seed_loop("arraymodule", steps),
    }
    traces_ok = (
        runs["int"].traces == int_steps
        and runs["array"].traces == 1
        and runs["arraymodule"].traces == 1
        and int(runs["arraymodule"].scene.x) == steps
    )
    rows = [
        Row(
            f"seed loop: traces over {steps} steps (plain int: {int_steps} steps)",
            f"int: {runs['int'].traces}, hand fix: {runs['array'].traces}",
            str(runs["arraymodule"].traces),
            "",
            "exactly 1",
            "pass" if traces_ok else "FAIL",
        )
    ]
    # Per-step time on warm caches, the two flat variants interleaved in blocks.
    array_scene = SEED_VARIANTS["array"]()
    af_scene = SEED_VARIANTS["arraymodule"]()
    array_step, af_step = runs["array"].step, runs["arraymodule"].step
    base, cand, ratio = compare(
        lambda: array_step(array_scene, 1),
        lambda: af_step(af_scene, 1),
        number=100,
        rounds=6 if quick else 30,
    )
    runs["array"].warm_us, runs["array"].warm_ratio = base, 1.0
    runs["arraymodule"].warm_us, runs["arraymodule"].warm_ratio = cand, ratio
    rows.append(
        Row(
            "seed loop: us per step (warm)",
            f"{base:.1f} (hand fix); int: {later_step_us(runs['int']):,.0f}",
            f"{cand:.1f}",
            f"{ratio:.3f}",
            "<= 1.05x hand fix",
            _status(ratio <= 1.05, quick),
        )
    )
    return rows, runs, traces_ok


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def seed_table(runs: dict[str, SeedRun], steps: int) -> Table:
    """The README's before/after table: traces, the compile, every later step."""
    int_run = runs["int"]
    int_us = later_step_us(int_run)
    af_us = runs["arraymodule"].warm_us
    rows = [
        [
            SEED_LABELS["int"],
            f"one per step ({int_run.traces} in {len(int_run.cumulative_s)})",
            _ms(int_run.cumulative_s[0]),
            f"{int_us / 1e3:.1f} ms (traces and compiles again)",
        ]
    ]
    for name in ("array", "arraymodule"):
        run = runs[name]
        rows.append(
            [
                SEED_LABELS[name],
                str(run.traces),
                _ms(run.cumulative_s[0]),
                f"{run.warm_us:.1f} us",
            ]
        )
    ratio = runs["arraymodule"].warm_ratio
    caption = (
        f"{steps} steps of `scene = step(scene, 1)` under `eqx.filter_jit`; the "
        f"plain Module's first {len(int_run.cumulative_s)} steps only. Later steps "
        "of the plain Module: the median step; of the other two: medians of warm "
        "steps timed side by side. Per later step `af.ArrayModule` takes "
        f"{ratio:.2f}x the hand fix's time and is {int_us / af_us:,.0f}x faster "
        "than the plain Module."
    )
    return Table(
        ["base class", "traces", "first step (trace + compile)", "each later step"],
        rows,
        caption,
    )


@case
def seed_loop_case(results: Results) -> None:
    rows, runs, traces_ok = bench_seed_loop(results.quick)
    results.rows += rows
    results.traces_ok &= traces_ok
    steps = len(runs["arraymodule"].cumulative_s)
    results.tables["seed"] = seed_table(runs, steps)
    results.raw["seed_loop"] = {
        name: {
            "label": SEED_LABELS[name],
            "cumulative_s": [float(f"{t:.6g}") for t in run.cumulative_s],
        }
        for name, run in runs.items()
    }


# -- 2 and 3. construction -----------------------------------------------------


class PlainThree(eqx.Module):
    a: Array
    b: Array
    c: Array


class HandConverted(eqx.Module):
    a: Array = eqx.field(converter=lambda x: jnp.asarray(x, dtype=jnp.float32))
    b: Array = eqx.field(converter=lambda x: jnp.asarray(x, dtype=jnp.float32))
    c: Array = eqx.field(converter=lambda x: jnp.asarray(x, dtype=jnp.float32))


def _unchanged(x):
    return x


class IdentityConverted(eqx.Module):
    """The cost of equinox's converter hook alone: the floor for any converter."""

    a: Array = eqx.field(converter=_unchanged)
    b: Array = eqx.field(converter=_unchanged)
    c: Array = eqx.field(converter=_unchanged)


class AfThree(af.ArrayModule):
    a: Float[Array, ""]
    b: Float[Array, ""]
    c: Float[Array, ""]


def bench_construction(quick: bool) -> list[Row]:
    rounds = 7 if quick else 41
    # Distinct values, the same sequence for both sides: nothing can be cached.
    rng = np.random.default_rng(0)
    triples = [tuple(float(v) for v in rng.normal(size=3)) for _ in range(1024)]
    base_it, cand_it = itertools.cycle(triples), itertools.cycle(triples)
    base, cand, ratio = compare(
        lambda: HandConverted(*next(base_it)),
        lambda: AfThree(*next(cand_it)),
        number=100 if quick else 200,
        rounds=rounds,
    )
    rows = [
        Row(
            "construct, 3 Python floats (us)",
            f"{base:.1f} (eqx.field(converter=jnp.asarray(x, f32)))",
            f"{cand:.1f}",
            f"{ratio:.3f}",
            "<= 0.6x",
            _status(ratio <= 0.6, quick),
        )
    ]
    arrays = [jnp.asarray(np.float32(v)) for v in (1.0, 2.0, 3.0)]
    base, cand, ratio = compare(
        lambda: PlainThree(*arrays),
        lambda: AfThree(*arrays),
        number=500 if quick else 2000,
        rounds=rounds,
    )
    rows.append(
        Row(
            "construct, 3 float32 arrays (us)",
            f"{base:.1f} (plain eqx.Module)",
            f"{cand:.1f}",
            f"{ratio:.3f}",
            "<= 1.15x",
            _status(ratio <= 1.15, quick),
        )
    )
    base, cand, ratio = compare(
        lambda: PlainThree(*arrays),
        lambda: IdentityConverted(*arrays),
        number=500 if quick else 2000,
        rounds=rounds,
    )
    rows.append(
        Row(
            "floor: 3 arrays through eqx.field(converter=identity) (us)",
            f"{base:.1f} (plain eqx.Module)",
            f"{cand:.1f} (not arrayfield)",
            f"{ratio:.3f}",
            "report",
            "info",
        )
    )
    return rows


# -- 4. class definition and first instance ------------------------------------

_CLASS_SOURCE = """
class Ten({base}):
    a: Float[Array, ""]
    b: "Float[Array, '']"
    c: Int[Array, ""]
    d: "Int[Array, '']"
    e: Float[Array, "n"]
    f: "Float[Array, 'n']"
    g: Array
    h: "Array"
    i: Float[Array, ""] | None
    j: "Float[Array, ''] | None"
"""
_TEN_ARGS = (1.0, 2.0, 3, 4, [1.0, 2.0], [3.0, 4.0], 5.0, 6.0, 7.0, None)


def _class_namespace() -> types.ModuleType:
    # String annotations resolve in the defining module's globals, so the classes
    # live in a real (registered) module, as user code would.
    module = types.ModuleType("_arrayfield_bench_classes")
    module.__dict__.update(
        Array=Array, Float=Float, Int=Int, eqx=eqx, af=af, jnp=jnp, np=np
    )
    sys.modules[module.__name__] = module
    return module


def bench_class_definition(quick: bool) -> list[Row]:
    from arrayfield import _spec

    module = _class_namespace()
    plain_code = compile(_CLASS_SOURCE.format(base="eqx.Module"), "<plain>", "exec")
    af_code = compile(_CLASS_SOURCE.format(base="af.ArrayModule"), "<af>", "exec")
    f32 = np.float32

    def plain():
        exec(plain_code, module.__dict__)
        # The hand-written equivalent: every array wrapped by the caller.
        a = [jnp.asarray(f32(1.0)), jnp.asarray(f32(2.0))]
        module.Ten(*a, *a, *a, a[0], a[1], a[0], None)

    def with_af():
        _spec._cached_field_spec.cache_clear()  # cold: parse every annotation
        exec(af_code, module.__dict__)
        module.Ten(*_TEN_ARGS)

    base, cand, ratio = compare(plain, with_af, number=5, rounds=7 if quick else 31)
    return [
        Row(
            "class with 10 fields (5 string annotations) + first instance (us)",
            f"{base:,.0f} (eqx.Module, caller wraps arrays)",
            f"{cand:,.0f}",
            f"{ratio:.2f}",
            "report",
            "info",
        )
    ]


# -- 5. import time ------------------------------------------------------------


def _import_ms(statement: str) -> float:
    # Byte-compiled, as users import it: pip compiles an installed wheel, and a
    # checkout writes __pycache__ on its first import. Where PYTHONDONTWRITEBYTECODE
    # is set (as on some CI machines), every run would recompile arrayfield's source
    # (but not equinox's, compiled at install) and time the compiler instead.
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], check=True, env=env)
    return (time.perf_counter() - start) * 1e3


# `import arrayfield` alone loads nothing heavy (the CLI's path); a model's first
# use of ArrayModule loads the core, JAX and equinox: that is what is compared.
_IMPORTS = {
    "equinox": "import equinox",
    "arrayfield": "import arrayfield; arrayfield.ArrayModule",
}


def bench_import(quick: bool) -> list[Row]:
    eqx_ms, af_ms = [], []
    for statement in _IMPORTS.values():
        _import_ms(statement)  # writes the bytecode caches; not timed
    for r in range(3 if quick else 25):
        pair = ("equinox", "arrayfield") if r % 2 == 0 else ("arrayfield", "equinox")
        for module in pair:
            (eqx_ms if module == "equinox" else af_ms).append(
                _import_ms(_IMPORTS[module])
            )
    base, cand = statistics.median(eqx_ms), statistics.median(af_ms)
    # Paired round by round: a busy neighbour slows both imports of a round alike.
    added = statistics.median(a - e for a, e in zip(af_ms, eqx_ms, strict=True))
    return [
        Row(
            "python -c 'import ...; arrayfield.ArrayModule' (ms, subprocess)",
            f"{base:.0f} (import equinox)",
            f"{cand:.0f}",
            f"{added:+.0f} ms (paired)",
            "<= +30 ms",
            _status(added <= 30, quick),
        )
    ]


# -- 6. memory -----------------------------------------------------------------


def _bytes_per_instance(build: Callable[[int], Any], count: int) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        instances = [build(i) for i in range(count)]
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    del instances
    return grown / count


def bench_memory(quick: bool) -> list[Row]:
    count = 2_000 if quick else 10_000
    values = np.linspace(0.0, 1.0, count, dtype=np.float64).tolist()
    f32 = np.float32

    def plain(i):
        v = values[i]
        return PlainThree(
            jnp.asarray(f32(v)), jnp.asarray(f32(v + 1)), jnp.asarray(f32(v + 2))
        )

    def with_af(i):
        v = values[i]
        return AfThree(v, v + 1, v + 2)

    plain(0), with_af(0)  # warm every cache before measuring
    base = _bytes_per_instance(plain, count)
    cand = _bytes_per_instance(with_af, count)
    sample = with_af(0)
    only_arrays = set(vars(sample)) == {"a", "b", "c"} and all(
        isinstance(v, jax.Array) for v in vars(sample).values()
    )
    return [
        Row(
            f"tracemalloc bytes per instance ({count:,} instances)",
            f"{base:,.0f} (eqx.Module, hand-made arrays)",
            f"{cand:,.0f}",
            f"{cand / base:.3f}",
            "no extra objects",
            _status(only_arrays and cand <= base * 1.02 + 16, quick),
        )
    ]


# -- retrace diagnostics (benchmarks/retrace_overhead.py, when present) ---------


def bench_retrace(quick: bool) -> list[Row]:
    try:
        retrace_overhead = _sibling("retrace_overhead")
    except ModuleNotFoundError as error:
        if error.name != "retrace_overhead":
            raise
        return []
    rows = []
    for found in retrace_overhead.main(quick):
        ratio, target = found.get("ratio"), found.get("target")
        numeric = isinstance(ratio, (int, float)) and isinstance(target, (int, float))
        rows.append(
            Row(
                f"{found['case']} (us)",
                f"{found['baseline_us']:.1f}",
                f"{found['arrayfield_us']:.1f}",
                f"{ratio:.3f}" if isinstance(ratio, (int, float)) else str(ratio),
                f"< {target}x" if numeric else str(target or ""),
                _status(ratio < target, quick) if numeric else "info",  # type: ignore[operator]
            )
        )
    return rows


# -- per-step dispatch: af.filter_jit (benchmarks/dispatch.py) -------------------


def _dispatch() -> types.ModuleType:
    return _sibling("dispatch")


def bench_dispatch(quick: bool) -> tuple[list[Row], list[dict[str, Any]]]:
    dispatch = _dispatch()
    rows = []
    measured = dispatch.measure(quick)
    for found in measured:
        us = found["us"]
        key, bound = dispatch.TARGETS.get(found["case"], ("af/jax", None))
        jax_us = f", jax.jit {us['jax']:.1f}" if "jax" in us else ""
        if set(found["traces"].values()) != {1}:  # exact: each jit traces once
            rows.append(
                Row(
                    f"af.filter_jit, {found['case']}: traces",
                    str(found["traces"]),
                    str(found["traces"]["af"]),
                    "",
                    "exactly 1 each",
                    "FAIL",
                )
            )
        rows.append(
            Row(
                f"af.filter_jit, {found['case']}, {found['leaves']} leaves (us)",
                f"eqx.filter_jit {us['eqx']:.1f}{jax_us}",
                f"{us['af']:.1f}",
                f"{found[key]:.2f}x {key.split('/')[1]}",
                f"<= {bound}x {key.split('/')[1]}" if bound else "report",
                _status(found[key] <= bound, quick) if bound else "info",
            )
        )
    return rows, measured


def dispatch_table(measured: list[dict[str, Any]], quick: bool) -> Table:
    """One row per loop: the three jits' medians (best round) and the ratios."""
    rows = []
    for found in measured:
        us, best = found["us"], found["best"]
        key, bound = _dispatch().TARGETS.get(found["case"], ("", None))
        cells = {
            name: f"{us[name]:.1f} ({best[name]:.1f})" if name in us else "-"
            for name in ("af", "eqx", "jax")
        }
        ratios = {
            k: f"{found[k]:.2f}x" if found.get(k) is not None else "-"
            for k in ("af/jax", "af/eqx")
        }
        if bound is not None:
            verdict = _status(found[key] <= bound, quick)
            ratios[key] += f" (target <= {bound}x: {verdict})"
        leaves = found["leaves"]
        rows.append([found["case"], str(leaves), *cells.values(), *ratios.values()])
    columns = ["loop", "leaves", "`af.filter_jit`", "`eqx.filter_jit`", "`jax.jit`"]
    rounds = 7 if quick else 31  # dispatch.measure's
    caption = (
        f"Microseconds per step, medians of {rounds} rounds (ratios are medians "
        "of per-round ratios); in parentheses, the least disturbed round."
    )
    return Table([*columns, "af / jax", "af / eqx"], rows, caption)


@case
def construction_case(results: Results) -> None:
    results.rows += bench_construction(results.quick)


@case
def class_definition_case(results: Results) -> None:
    results.rows += bench_class_definition(results.quick)


@case
def import_case(results: Results) -> None:
    results.rows += bench_import(results.quick)


@case
def memory_case(results: Results) -> None:
    results.rows += bench_memory(results.quick)


@case
def retrace_case(results: Results) -> None:
    results.rows += bench_retrace(results.quick)


@case
def dispatch_case(results: Results) -> None:
    rows, measured = bench_dispatch(results.quick)
    results.rows += rows
    results.traces_ok &= all(row.status != "FAIL" for row in rows)
    results.tables["dispatch"] = dispatch_table(measured, results.quick)
    results.raw["dispatch"] = [
        {k: found[k] for k in ("case", "leaves", "us", "best", "af/jax", "af/eqx")}
        for found in measured
    ]


# -- many fields, one compile (benchmarks/field_compiles.py) -------------------------


@case
def many_fields_case(results: Results) -> None:
    field_compiles = _sibling("field_compiles")
    measured, cache = field_compiles.main(results.quick)
    rows = [Row(**row) for row in field_compiles.rows(measured, cache)]
    results.rows += rows
    results.traces_ok &= all(row.status != "FAIL" for row in rows)
    results.tables["many_fields"] = Table(*field_compiles.fields_table(measured))
    results.tables["persistent_cache"] = Table(*field_compiles.cache_table(cache))
    results.raw["many_fields"] = [
        {k: m[k] for k in ("jit", "fields", "steps", "traces", "compile_s", "step_ms")}
        for m in measured
    ]


# -- boxed fields, numbers shared (benchmarks/field_numbers.py) ---------------------


@case
def boxed_fields_case(results: Results) -> None:
    field_numbers = _sibling("field_numbers")
    measured = field_numbers.main(results.quick)
    rows = [Row(**row) for row in field_numbers.rows(measured)]
    results.rows += rows
    results.traces_ok &= all(row.status != "FAIL" for row in rows)
    results.tables["boxed_fields"] = Table(*field_numbers.table(measured))
    results.tables["share_numbers_costs"] = Table(*field_numbers.costs(measured))
    results.raw["boxed_fields"] = measured


# -- the first call in a fresh process (benchmarks/first_call.py) -------------------


@case
def first_call_case(results: Results) -> None:
    first_call = _sibling("first_call")
    measured = first_call.main(results.quick)
    rows = [Row(**row) for row in first_call.rows(measured)]
    results.rows += rows
    results.traces_ok &= all(row.status != "FAIL" for row in rows)
    results.tables["first_call"] = Table(*first_call.table(measured))
    results.raw["first_call"] = measured


# -- migrate --check against ruff (benchmarks/migrate_tree.py) -----------------------


@case
def migrate_case(results: Results) -> None:
    migrate_tree = _sibling("migrate_tree")
    found = migrate_tree.measure(300, 3 if results.quick else 9)
    seconds, ratio = found["seconds"], found["ratio"]
    results.rows.append(
        Row(
            "arrayfield migrate --check, 300-file tree (s, subprocess, wall)",
            f"{seconds['ruff']:.3f} (ruff check)",
            f"{seconds['migrate']:.3f}",
            f"{ratio['wall']:.1f}x ruff",
            "<= 5x ruff",
            _status(ratio["wall"] <= 5, results.quick),
        )
    )
    results.tables["migrate"] = Table(
        ["", "wall (s)", "CPU (s)"],
        [
            [label, f"{seconds[key]:.3f}", f"{seconds[key + ' cpu']:.3f}"]
            for label, key in (
                ("`arrayfield migrate --check`", "migrate"),
                ("`ruff check --no-cache`", "ruff"),
            )
        ]
        + [["migrate / ruff", f"{ratio['wall']:.1f}x", f"{ratio['cpu']:.1f}x"]],
        f"{found['files']} files, {found['lines']:,} lines, {found['module_files']}"
        " with Module classes (`benchmarks/migrate_tree.py`): both tools as fresh"
        " processes, interleaved; medians, ratios the median of per-round ratios.",
    )
    results.raw["migrate"] = found


# Issue 30: a generated 5 MB file took minutes under `--diff` while libcst
# parsed and rebuilt all of it; seconds is the target.
LARGE_FILE_TARGET_S = 15.0


@case
def migrate_large_case(results: Results) -> None:
    migrate_tree = _sibling("migrate_tree")
    classes = 2_500 if results.quick else 25_000
    found = migrate_tree.measure_large(classes, 1 if results.quick else 3)
    seconds, peaks = found["seconds"], found["peak_mb"]
    slowest = max(seconds[label] for label, _ in migrate_tree.LARGE_COMMANDS)
    results.rows.append(
        Row(
            f"arrayfield migrate, one {found['megabytes']:.1f} MB file"
            " (s, slowest of --check/--diff)",
            f"{seconds['ruff check']:.2f} (ruff check)",
            f"{slowest:.2f}",
            f"{slowest / seconds['ruff check']:.1f}x ruff",
            f"<= {LARGE_FILE_TARGET_S:.0f} s",
            _status(slowest <= LARGE_FILE_TARGET_S, results.quick),
        )
    )
    results.tables["migrate_large"] = Table(
        ["command", "wall (s)", "peak memory (MB)", "/ ruff"],
        [
            [
                f"`{label}`",
                f"{seconds[label]:.2f}",
                f"{peaks[label]:.0f}",
                f"{seconds[label] / seconds['ruff check']:.1f}x",
            ]
            for label in seconds
        ],
        f"One generated module, {found['classes']:,} Module classes of three fields"
        f" and a method ({found['lines']:,} lines, {found['megabytes']:.1f} MB);"
        " each command a fresh process, interleaved with `ruff check --no-cache`"
        f" round by round; medians of {found['rounds']} rounds, peak resident"
        " size the largest seen.",
    )
    results.raw["migrate_large"] = found


# -- report --------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """Where the run ran: published beside every table."""
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "jax": jax.__version__,
        "equinox": eqx.__version__,
        "backend": jax.default_backend(),
    }


def summary_table(rows: list[Row]) -> Table:
    columns = ["case", "baseline", "arrayfield", "ratio", "target", "result"]
    cells = [[getattr(row, f.name) for f in dataclasses.fields(Row)] for row in rows]
    caption = (
        "Times are medians over interleaved rounds; ratios are medians of "
        "per-round ratios (arrayfield / baseline)."
    )
    return Table(columns, cells, caption)


def to_json(results: Results, seconds: float) -> dict[str, Any]:
    tables = {"summary": summary_table(results.rows), **results.tables}
    return {
        "mode": "quick" if results.quick else "full",
        "date": datetime.date.today().isoformat(),
        "seconds": round(seconds),
        "machine": machine(),
        "tables": {name: dataclasses.asdict(t) for name, t in tables.items()},
        "raw": results.raw,
    }


def dumps(found: dict[str, Any]) -> str:
    """`found` as indented JSON, but each raw series (thousands of numbers) on
    one line, so that a new run's diff stays readable."""
    rest = {k: v for k, v in found.items() if k != "raw"}
    text = json.dumps(rest, indent=1)
    series = ",\n".join(
        f"  {json.dumps(name)}: {json.dumps(value)}"
        for name, value in found["raw"].items()
    )
    return f'{text[:-2]},\n "raw": {{\n{series}\n }}\n}}\n'


def markdown(table: Table) -> str:
    lines = [
        "| " + " | ".join(table.columns) + " |",
        "|" + "---|" * len(table.columns),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in table.rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run, < 60 s: exact trace counts, timings reported but not judged",
    )
    parser.add_argument(
        "--no-publish",
        action="store_true",
        help="write results.json only; leave the README, the docs and the plots",
    )
    parser.add_argument(
        "--results",
        type=Path,
        help="the file a full run writes (default results/results.json); "
        "results/newest-jax.json holds the run on the newest JAX (Python 3.12+)",
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=[_case_name(measure) for measure in CASES],
        help="a case not to run (repeatable): the newest JAX's run skips the "
        "codemod's, which imports no JAX",
    )
    args = parser.parse_args(argv)
    results = Results(quick=args.quick)
    started = time.perf_counter()
    for measure in CASES:
        if _case_name(measure) not in args.skip:
            measure(results)
    elapsed = time.perf_counter() - started

    print(markdown(summary_table(results.rows)))
    print(f"\n{'quick' if args.quick else 'full'} run, {elapsed:.0f} s")
    # A quick run never replaces the full run's file, which the docs publish.
    path = QUICK_RESULTS_FILE if args.quick else args.results or RESULTS_FILE
    path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(to_json(results, elapsed)))
    print(f"wrote {path}")
    if not args.quick and not args.no_publish:
        publish = _sibling("publish")
        publish.main([])
    if not results.traces_ok or any(row.status == "FAIL" for row in results.rows):
        print("FAIL: a trace count is wrong (see the table)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
