"""The first call in a fresh process: what a short job pays before it computes.

One fit step (an `af.ArrayModule` source with a static integer origin used as
a slice start and a static float weight, `jax.value_and_grad`, an Adam update),
called once in a new Python process, in each way arrayfield offers:

- `eqx.filter_jit`, JAX's defaults (no persistent cache): trace and compile;
- `af.filter_jit` after `af.use_compile_cache(dir)`, the directory written by
  an earlier process: trace, then read the program;
- a field with new numbers (an origin no process has seen), `share_numbers=True`,
  the same warm directory, after the family's first field in that process:
  trace, read the family's shared program;
- `af.deserialize` of an `af.export`ed step: no trace; compile at load, or
  read the program where the cache holds it.

Each way runs in `ROUNDS` fresh processes, interleaved; a process reports the
seconds from just before its first call until the result is ready (imports,
building the arguments and reading the export file excluded) and the step's
XLA compiles and cache reads (`af.count_compiles`). Medians.

`run.py` publishes `table(...)` (docs/ahead_of_time.md) and `rows(...)`;
`python benchmarks/first_call.py [--quick]` prints the table alone.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROUNDS, QUICK_ROUNDS = 7, 2

# One process: `python first_call.py --process WAY CACHE_DIR EXPORT_FILE ORIGIN`.
WAYS = {
    "eqx": "eqx.filter_jit, JAX's defaults",
    "cache": "af.filter_jit, af.use_compile_cache (warm)",
    "numbers": "a field with new numbers after the family's first, "
    "share_numbers=True, af.use_compile_cache (warm)",
    "export": "af.deserialize of af.export",
    "export_cache": "af.deserialize of af.export, af.use_compile_cache (warm)",
}


os.environ.setdefault("JAX_PLATFORMS", "cpu")

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from jaxtyping import Array, Float  # noqa: E402

import arrayfield as af  # noqa: E402


class Source(af.ArrayModule):
    flux: Float[Array, ""]
    centre: Float[Array, "2"]
    origin: int = af.field(static=True)
    weight: float = af.field(static=True, default=0.1)


OPTIMISER = optax.adam(1e-2)


def loss(source: Source, image: Array) -> Array:
    patch = image[:, source.origin : source.origin + 8]
    grid = jnp.arange(8.0) - source.centre[0]
    model = source.flux * jnp.exp(-(grid**2) / 2)[None, :] * jnp.ones((8, 1))
    return jnp.sum((patch - model) ** 2) + source.weight * source.flux**2


def step(source: Source, state: Any, image: Array) -> tuple:
    value, grads = jax.value_and_grad(loss)(source, image)
    updates, state = OPTIMISER.update(grads, state, source)
    return eqx.apply_updates(source, updates), state, value


def arguments(origin: int) -> tuple:
    source = Source(flux=1.0, centre=[3.0, 3.0], origin=origin)
    state = OPTIMISER.init(eqx.filter(source, eqx.is_array))
    return source, state, jnp.ones((8, 32))


def _process(way: str, cache_dir: str, export_file: str, origin: int) -> dict:
    import time

    if way not in ("eqx", "export"):
        af.use_compile_cache(cache_dir)
    args = arguments(origin)
    if way == "eqx":
        run = eqx.filter_jit(step)
    elif way in ("cache", "numbers"):
        run = af.filter_jit(step, share_numbers=way == "numbers")
        if way == "numbers":  # the family's first field, then one with new numbers
            jax.block_until_ready(run(*arguments(1)))
    elif way == "write_export":
        Path(export_file).write_bytes(af.export(step, *args).serialize())
        return {}
    else:
        data = Path(export_file).read_bytes()
    with af.count_compiles() as count:
        start = time.perf_counter()
        if way.startswith("export"):
            run = af.deserialize(data)
        out = jax.block_until_ready(run(*args))
        seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "compiled": sum(count.compiled.values()),
        "loaded": sum(count.loaded.values()),
        "value": float(out[2]),
    }


def _run(way: str, cache_dir: str, export_file: str, origin: int) -> dict:
    done = subprocess.run(
        [
            sys.executable,
            str(HERE),
            "--process",
            way,
            cache_dir,
            export_file,
            f"{origin}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    if done.returncode != 0:
        raise RuntimeError(f"{way}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def main(quick: bool) -> dict[str, Any]:
    rounds = QUICK_ROUNDS if quick else ROUNDS
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir, export_file = str(Path(tmp, "cache")), str(Path(tmp, "step.bin"))
        # What the earlier job left: the cache written by a field at origin 1,
        # then one at origin 2 (a share_numbers family's two programs), and the
        # exported step for origin 1, loaded once (its program in the cache).
        _run("cache", cache_dir, export_file, 1)
        _run("numbers", cache_dir, export_file, 2)
        _run("write_export", cache_dir, export_file, 1)
        _run("export_cache", cache_dir, export_file, 1)
        measured: dict[str, list[dict]] = {way: [] for way in WAYS}
        for r in range(rounds):
            for way in WAYS if r % 2 == 0 else reversed(WAYS):
                # new numbers: an origin no process has seen
                origin = 3 + r if way == "numbers" else 1
                measured[way].append(_run(way, cache_dir, export_file, origin))
    return {
        way: {
            "label": WAYS[way],
            "seconds": statistics.median(m["seconds"] for m in runs),
            "compiled": max(m["compiled"] for m in runs),
            "loaded": statistics.median(m["loaded"] for m in runs),
            "values": sorted({m["value"] for m in runs}),
            "rounds": len(runs),
        }
        for way, runs in measured.items()
    }


def table(measured: dict[str, Any]) -> tuple[list[str], list[list[str]], str]:
    base = measured["eqx"]["seconds"]
    rows = [
        [
            m["label"],
            f"{m['seconds'] * 1e3:.0f} ms",
            f"{m['seconds'] / base:.2f}x",
            str(m["compiled"]),
            f"{m['loaded']:.0f}",
        ]
        for m in measured.values()
    ]
    caption = (
        f"One fit step's first call in a fresh process, median of "
        f"{measured['eqx']['rounds']} processes per row, interleaved; from just "
        "before the call (or the load) to the result, imports excluded. "
        "Compiles and cache reads are the step's (af.count_compiles)."
    )
    return ["first call", "time", "vs eqx", "compiles", "cache reads"], rows, caption


def rows(measured: dict[str, Any]) -> list[dict[str, str]]:
    base = measured["eqx"]
    out = []
    for way in ("cache", "numbers", "export_cache"):
        m = measured[way]
        out.append(
            {
                "case": f"first call in a fresh process: {m['label']}",
                "baseline": f"eqx.filter_jit {base['seconds'] * 1e3:.0f} ms, "
                f"{base['compiled']} compile",
                "arrayfield": f"{m['seconds'] * 1e3:.0f} ms, {m['compiled']} compiles",
                "ratio": f"{m['seconds'] / base['seconds']:.2f}x",
                "target": "0 compiles (issue 51)",
                "status": "pass" if m["compiled"] == 0 else "FAIL",
            }
        )
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["--process"]:
        way, cache_dir, export_file, origin = sys.argv[2:6]
        print(json.dumps(_process(way, cache_dir, export_file, int(origin))))
    else:
        measured = main("--quick" in sys.argv)
        columns, body, caption = table(measured)
        print(" | ".join(columns))
        for row in body:
            print(" | ".join(row))
        print(caption)
