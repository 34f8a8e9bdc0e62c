"""arrayfield's performance targets, each measured against its baseline.

Run `python benchmarks/run.py` for the full suite or `--quick` for a smoke run
(under a minute). Every timing compares arrayfield with its baseline in one process,
interleaved round by round, and reports medians: timings are reported, never
asserted. Trace counts are exact: if one is wrong the script exits with status 1.
`dispatch.py` adds the per-step cost of `af.filter_jit` (issue 13), and
`field_compiles.py` K fields of a sky-fitting job under the three jits, with
JAX's persistent compilation cache across processes (issue 20).

The full run writes `benchmarks/results/results.md` and
`benchmarks/results/seed_loop.png` and `dispatch.png` (when matplotlib is
installed); `--quick` writes its plots as `seed_loop_quick.png` and
`dispatch_quick.png`.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import itertools
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


@dataclasses.dataclass
class Row:
    case: str
    baseline: str
    arrayfield: str
    ratio: str
    target: str
    status: str  # "pass", "MISS", "FAIL" (trace count: exits 1), "info" or not judged


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
    """The workaround users write by hand: wrap the value in an array."""

    x: Array


class AfScene(af.ArrayModule):
    """The same scene on ArrayModule: `0` becomes a strong int32 array."""

    x: Int[Array, ""]


SEED_VARIANTS: dict[str, Callable[[], eqx.Module]] = {
    "int": lambda: IntScene(0),
    "array": lambda: ArrayScene(jnp.asarray(0)),
    "arraymodule": lambda: AfScene(0),
}


@dataclasses.dataclass
class SeedRun:
    traces: int
    cumulative_s: list[float]  # wall time after each step, first step included
    scene: Any  # the final scene, to check the counter really counted
    step: Callable[[Any, Any], Any]  # the jitted step, for further timing


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
        cumulative.append(time.perf_counter() - start)
    jax.block_until_ready(scene)
    return SeedRun(traces[0], cumulative, scene, step)


def bench_seed_loop(quick: bool) -> tuple[list[Row], dict[str, SeedRun], bool]:
    steps = 300 if quick else 3000
    int_steps = 30 if quick else 150
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
            f"int: {runs['int'].traces}, array: {runs['array'].traces}",
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
    int_per_step = runs["int"].cumulative_s[-1] / int_steps * 1e6
    rows.append(
        Row(
            "seed loop: us per step (warm)",
            f"{base:.1f} (array); int: {int_per_step:,.0f}",
            f"{cand:.1f}",
            f"{ratio:.3f}",
            "<= 1.05x array",
            _status(ratio <= 1.05, quick),
        )
    )
    return rows, runs, traces_ok


def _pyplot() -> Any:
    """matplotlib's pyplot without a display, or None when it is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)


def plot_seed_loop(runs: dict[str, SeedRun], path: Path) -> bool:
    plt = _pyplot()
    if plt is None:
        return False
    labels = {
        "int": "eqx.Module, Python int (recompiles every step; first "
        f"{len(runs['int'].cumulative_s)} steps only)",
        "array": "eqx.Module, hand-wrapped jnp.asarray(0)",
        "arraymodule": "af.ArrayModule, plain 0",
    }
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, style in (("int", "-"), ("array", "--"), ("arraymodule", ":")):
        seconds = runs[name].cumulative_s
        ax.plot(range(1, len(seconds) + 1), seconds, style, label=labels[name])
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("cumulative wall time [s] (log scale)")
    ax.set_title("Seed loop: scene = step(scene, 1) under eqx.filter_jit")
    ax.legend(fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    _save(fig, path)
    return True


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
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
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
    sys.path.insert(0, str(HERE))
    try:
        import retrace_overhead  # pyright: ignore[reportMissingImports]
    except ModuleNotFoundError as error:
        if error.name != "retrace_overhead":
            raise
        return []
    finally:
        sys.path.remove(str(HERE))
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


def bench_dispatch(quick: bool) -> tuple[list[Row], list[dict[str, Any]]]:
    sys.path.insert(0, str(HERE))
    try:
        import dispatch  # pyright: ignore[reportMissingImports]
    finally:
        sys.path.remove(str(HERE))
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


# -- many fields, one compile (benchmarks/field_compiles.py) -------------------------


def bench_many_fields(quick: bool) -> tuple[list[Row], list[dict[str, Any]]]:
    sys.path.insert(0, str(HERE))
    try:
        import field_compiles  # pyright: ignore[reportMissingImports]
    finally:
        sys.path.remove(str(HERE))
    found, measured = field_compiles.main(quick)
    return [Row(**row) for row in found], measured


def plot_dispatch(measured: list[dict[str, Any]], path: Path) -> bool:
    """Per-step time of each jit relative to `jax.jit`, one group per loop."""
    plt = _pyplot()
    if plt is None:
        return False
    cases = [f for f in measured if "jax" in f["us"]]  # the fallback has no jax.jit
    jits = [("af", "af.filter_jit"), ("eqx", "eqx.filter_jit"), ("jax", "jax.jit")]
    width = 0.27
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for j, (name, label) in enumerate(jits):
        xs = [i + (j - 1) * width for i in range(len(cases))]
        ratios = [f["us"][name] / f["us"]["jax"] for f in cases]
        bars = ax.bar(xs, ratios, width, label=label)
        us = [f["us"][name] for f in cases]
        labels = [f"{t:.1f} us" if t < 100 else f"{t:.0f} us" for t in us]
        ax.bar_label(bars, labels=labels, fontsize="x-small")
    ax.axhline(1.0, color="black", linewidth=0.8)
    names = [
        f"{f['case']}\n({f['leaves']} {'leaf' if f['leaves'] == 1 else 'leaves'})"
        for f in cases
    ]
    ax.set_xticks(range(len(cases)), names)
    ax.tick_params(axis="x", labelsize="small")
    ax.set_ylabel("time per step / jax.jit's")
    ax.set_title("Per-step dispatch, warm (labels: median us per step)")
    ax.legend(fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)
    _save(fig, path)
    return True


def _many_fields_plot(measured: list[dict[str, Any]], path: Path) -> bool:
    import field_compiles  # pyright: ignore[reportMissingImports]  (loaded above)

    return field_compiles.plot(measured, path)


# -- report --------------------------------------------------------------------


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
        f"jax {jax.__version__}, equinox {eqx.__version__}, "
        f"backend {jax.default_backend()}"
    )


def markdown(rows: list[Row]) -> str:
    header = ["case", "baseline", "arrayfield", "ratio", "target", "result"]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in rows:
        cells = [getattr(row, f.name) for f in dataclasses.fields(Row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run, < 60 s: exact trace counts, timings reported but not judged",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    started = time.perf_counter()

    seed_rows, runs, traces_ok = bench_seed_loop(quick)
    rows = seed_rows
    rows += bench_construction(quick)
    rows += bench_class_definition(quick)
    rows += bench_import(quick)
    rows += bench_memory(quick)
    rows += bench_retrace(quick)
    dispatch_rows, dispatch_measured = bench_dispatch(quick)
    rows += dispatch_rows
    many_fields_rows, many_fields_measured = bench_many_fields(quick)
    rows += many_fields_rows

    table = markdown(rows)
    print(table)
    elapsed = time.perf_counter() - started
    print(f"\n{'quick' if quick else 'full'} run, {elapsed:.0f} s on {machine()}")
    # A quick run's plots go beside the full run's, never over them.
    suffix = "_quick.png" if quick else ".png"
    plots = [
        (plot_seed_loop(runs, RESULTS / f"seed_loop{suffix}"), "seed_loop"),
        (plot_dispatch(dispatch_measured, RESULTS / f"dispatch{suffix}"), "dispatch"),
        (
            _many_fields_plot(many_fields_measured, RESULTS / f"many_fields{suffix}"),
            "many_fields",
        ),
    ]
    for written, name in plots:
        if written:
            print(f"wrote {(RESULTS / f'{name}{suffix}').relative_to(HERE.parent)}")
    if not quick:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "results.md").write_text(
            "# Benchmark results\n\n"
            f"Full run of `python benchmarks/run.py` ({elapsed:.0f} s) on "
            f"{machine()}.\n\n"
            "Times are medians over interleaved rounds; ratios are medians of "
            "per-round ratios (arrayfield / baseline).\n\n" + table + "\n"
        )
        print(f"wrote {(RESULTS / 'results.md').relative_to(HERE.parent)}")
    if not traces_ok or any(row.status == "FAIL" for row in rows):
        print("FAIL: a trace count is wrong (see the table)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
