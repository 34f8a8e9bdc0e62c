"""The first call in a fresh process: what a short job pays before it computes.

One fit step (an `af.ArrayModule` source with a static integer origin used as
a slice start and a static float weight, `jax.value_and_grad`, an Adam update),
called once in a new Python process, in each way arrayfield offers:

- `eqx.filter_jit`, JAX's defaults (no persistent cache): trace and compile;
- `af.filter_jit` after `af.use_compile_cache(dir)`, the directory written by
  an earlier process: trace, then read the program;
- a field with new numbers (an origin no process has seen), `share_numbers=True`,
  the same warm directory, the first call of its process: trace, read the
  family's shared program (which numbers it takes was kept beside the cache);
- `af.deserialize` of an `af.export`ed step: no trace; compile at load, or
  read the program where the cache holds it;
- a field with new numbers, `af.deserialize(data, step)` of an
  `af.export_family` written from two fields: trace (its numbers), compile the
  family's program at load, or read it where the cache holds it;
- a serialized XLA executable (`jax.experimental.serialize_executable`) of the
  step flattened to a list of arrays, its static part fixed: no trace, no
  compile, only a load. JAX documents no compatibility across versions or
  machines for these bytes, and nothing checks a call's static part: a
  reference for what a load can cost, not a way arrayfield offers.

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
    "numbers": "a field with new numbers, share_numbers=True, "
    "af.use_compile_cache (warm)",
    "export": "af.deserialize of af.export",
    "export_cache": "af.deserialize of af.export, af.use_compile_cache (warm)",
    "family": "a field with new numbers, af.deserialize of af.export_family",
    "family_cache": "a field with new numbers, af.deserialize of "
    "af.export_family, af.use_compile_cache (warm)",
    "executable": "a serialized XLA executable, loaded (reference)",
}

# The ways whose processes run a field with an origin no process has seen.
NEW_NUMBERS = ("numbers", "family", "family_cache")

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.tree_util as jtu  # noqa: E402
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

    from jax.experimental import serialize_executable

    if way not in ("eqx", "export", "family", "executable", "write_executable"):
        af.use_compile_cache(cache_dir)
    args = arguments(origin)
    leaves = jtu.tree_leaves(eqx.filter(args, eqx.is_array))
    if way == "eqx":
        run = eqx.filter_jit(step)
    elif way in ("cache", "numbers"):
        run = af.filter_jit(step, share_numbers=way == "numbers")
    elif way == "write_family":  # two fields: the family's two programs
        run = af.filter_jit(step, share_numbers=True)
        for origin in (1, 2):
            jax.block_until_ready(run(*arguments(origin)))
        return {}
    elif way == "write_export":
        Path(export_file).write_bytes(af.export(step, *args).serialize())
        return {}
    elif way == "write_family_export":  # the numbers origins 1 and 2 vary
        family = af.export_family(step, arguments(1), arguments(2))
        Path(export_file + ".family").write_bytes(family.serialize())
        return {}
    elif way == "write_executable":
        compiled = jax.jit(flat_step(args)).lower(leaves).compile()
        data, _, out_tree = serialize_executable.serialize(compiled)
        Path(export_file + ".xla").write_bytes(data)
        Path(export_file + ".outputs").write_text(f"{out_tree.num_leaves}")
        return {}
    elif way == "executable":
        data = Path(export_file + ".xla").read_bytes()
        outputs = int(Path(export_file + ".outputs").read_text())
    elif way.startswith("family"):
        data = Path(export_file + ".family").read_bytes()
    else:
        data = Path(export_file).read_bytes()
    with af.count_compiles() as count:
        start = time.perf_counter()
        if way.startswith("export"):
            run = af.deserialize(data)
        elif way.startswith("family"):
            run = af.deserialize(data, step)  # it traces each new field
        if way == "executable":
            # The flat step's trees: a list of arrays in, a list out (the loss
            # last).
            compiled = serialize_executable.deserialize_and_load(
                data,
                jtu.tree_structure(((leaves,), {})),
                jtu.tree_structure([0] * outputs),
            )
            value = jax.block_until_ready(compiled(leaves))[-1]
        else:
            value = jax.block_until_ready(run(*args))[2]
        seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "compiled": sum(count.compiled.values()),
        "loaded": sum(count.loaded.values()),
        "value": float(value),
    }


def flat_step(args: tuple) -> Any:
    """The step on the list of `args`' arrays, their static part fixed, giving
    the list of its output's arrays: a function `jax.jit` compiles as it is."""
    dynamic, static = eqx.partition(args, eqx.is_array)
    treedef = jtu.tree_structure(dynamic)

    def run(leaves: list) -> list:
        out = step(*eqx.combine(jtu.tree_unflatten(treedef, leaves), static))
        return jtu.tree_leaves(eqx.filter(out, eqx.is_array))

    return run


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
        # What the earlier jobs left: the cache written by a field at origin 1;
        # by fields at origins 1 and 2 with share_numbers (the family's two
        # programs, and which numbers the shared one takes); the exported step
        # for origin 1, loaded once (its program in the cache); the family
        # exported from origins 1 and 2, loaded once; the executable.
        _run("cache", cache_dir, export_file, 1)
        _run("write_family", cache_dir, export_file, 1)
        _run("write_export", cache_dir, export_file, 1)
        _run("export_cache", cache_dir, export_file, 1)
        _run("write_family_export", cache_dir, export_file, 1)
        _run("family_cache", cache_dir, export_file, 1)
        _run("write_executable", cache_dir, export_file, 1)
        measured: dict[str, list[dict]] = {way: [] for way in WAYS}
        for r in range(rounds):
            for way in WAYS if r % 2 == 0 else reversed(WAYS):
                # new numbers: an origin no process has seen
                origin = 3 + r if way in NEW_NUMBERS else 1
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


def agree(measured: dict[str, Any], base: dict[str, Any]) -> bool:
    """Whether every process of a way computed `base`'s loss (every origin
    reads the same constant image, so all do), within share_numbers' bound."""
    (expected,) = base["values"]
    return all(abs(v - expected) <= 1e-5 * abs(expected) for v in measured["values"])


def rows(measured: dict[str, Any]) -> list[dict[str, str]]:
    base = measured["eqx"]
    out = []
    for way in ("cache", "numbers", "export_cache", "family_cache"):
        m = measured[way]
        out.append(
            {
                "case": f"first call in a fresh process: {m['label']}",
                "baseline": f"eqx.filter_jit {base['seconds'] * 1e3:.0f} ms, "
                f"{base['compiled']} compile",
                "arrayfield": f"{m['seconds'] * 1e3:.0f} ms, {m['compiled']} compiles",
                "ratio": f"{m['seconds'] / base['seconds']:.2f}x",
                "target": "0 compiles, eqx.filter_jit's loss (issue 51)",
                "status": "pass" if m["compiled"] == 0 and agree(m, base) else "FAIL",
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
