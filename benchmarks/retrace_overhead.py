"""Per-call cost of `af.explain_retraces` on a filter_jit step that hits its cache.

Three callables run the same step, interleaved round by round in one process:
the plain `eqx.filter_jit` function, the same wrapped by `af.explain_retraces`,
and the plain one called inside `with af.explain_retraces():`. Each round times a
batch of baseline calls and a batch of one case back to back; times are medians
over rounds and the ratio is the median of the per-round ratios.

Run: `JAX_PLATFORMS=cpu .venv/bin/python benchmarks/retrace_overhead.py [--quick]`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

import arrayfield as af

TARGET = 1.05  # at most 5% more time per call


class Source(af.ArrayModule):
    flux: Float[Array, ""]
    size: Float[Array, ""]
    pixels: Float[Array, "8 8"]


class Scene(af.ArrayModule):
    sources: list[Source]
    background: Float[Array, ""]


def _step(scene: Scene, lr: Array) -> Scene:
    return jax.tree_util.tree_map(lambda s: s + lr, scene)


def _scene() -> Scene:
    return Scene(
        sources=[Source(flux=1.0, size=2.0, pixels=jnp.ones((8, 8)))],
        background=0.0,
    )


def _time_batch(call: Any, scene: Scene, lr: Array, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        scene = call(scene, lr)
    jax.block_until_ready(scene)
    return (time.perf_counter() - start) / calls * 1e6


def main(quick: bool = False) -> list[dict]:
    """Rows: case, baseline_us, arrayfield_us, ratio, target (ratio must be below)."""
    plain = eqx.filter_jit(_step)
    decorated = af.explain_retraces(eqx.filter_jit(_step))
    scene, lr = _scene(), jnp.asarray(1e-3, dtype=jnp.float32)
    for call in (plain, decorated):
        call(scene, lr)  # compile outside the timed rounds

    def in_block(scene: Scene, lr: Array) -> Scene:
        with af.explain_retraces():
            return _time_batch(plain, scene, lr, calls)  # type: ignore[return-value]

    rounds, calls = (21, 100) if quick else (101, 200)
    cases = {
        "decorator": lambda: _time_batch(decorated, scene, lr, calls),
        "context": lambda: in_block(scene, lr),
    }
    rows = []
    for case, timed in cases.items():
        # Each round times the baseline and the case back to back (in alternating
        # order), so load on the machine hits both alike; the ratio is the median
        # of per-round ratios.
        base, ours, ratios = [], [], []
        for i in range(rounds):
            if i % 2:
                b, o = _time_batch(plain, scene, lr, calls), timed()
            else:
                o, b = timed(), _time_batch(plain, scene, lr, calls)
            base.append(b)
            ours.append(o)
            ratios.append(o / b)
        rows.append(
            {
                "case": f"explain_retraces ({case}), filter_jit step, cache hit",
                "baseline_us": round(statistics.median(base), 2),
                "arrayfield_us": round(statistics.median(ours), 2),
                "ratio": round(statistics.median(ratios), 3),
                "target": TARGET,
            }
        )
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    for row in main(quick=parser.parse_args().quick):
        verdict = "ok" if row["ratio"] < row["target"] else "OVER TARGET"
        print(
            f"{row['case']}: {row['baseline_us']:.2f} us -> "
            f"{row['arrayfield_us']:.2f} us, ratio {row['ratio']:.3f} "
            f"(target < {row['target']}) {verdict}"
        )
