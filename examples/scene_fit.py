"""The scenario from the user report: a counter that starts as a Python `0` and is
stepped 3000 times through an `eqx.filter_jit` function.

On `eqx.Module` every step sees a new Python int, which `filter_jit` hashes into its
cache key: one trace (and one XLA compile) per step. On `af.ArrayModule` the counter
is an int32 array from the start: one trace in total.

Run: python examples/scene_fit.py
"""

import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import equinox as eqx
import jax
import numpy as np

import arrayfield as af

STEPS = 3000
SLOW_PREFIX = 100  # the recompiling variant is timed on a prefix only


class PlainScene(eqx.Module):
    x: np.array  # annotated like the report, but holds a Python int

    def __init__(self):
        self.x = 0


class Scene(af.ArrayModule):  # the only change
    x: np.array

    def __init__(self):
        self.x = 0


def fit(scene, steps):
    traces = 0

    @eqx.filter_jit
    def step(scene, x):
        nonlocal traces
        traces += 1  # a Python side effect: runs only while tracing
        return jax.tree_util.tree_map(lambda s: s + x, scene)

    start = time.perf_counter()
    for _ in range(steps):
        scene = step(scene, 1)
    jax.block_until_ready(scene)
    return scene, traces, time.perf_counter() - start


def main():
    plain, plain_traces, plain_time = fit(PlainScene(), SLOW_PREFIX)
    fast, fast_traces, fast_time = fit(Scene(), STEPS)
    plain_per_step = plain_time / SLOW_PREFIX
    print(
        f"eqx.Module     : {plain_traces:4d} traces in {SLOW_PREFIX} steps, "
        f"{plain_per_step * 1e3:7.3f} ms/step "
        f"(~{plain_per_step * STEPS:.1f} s for {STEPS} steps), x = {plain.x}"
    )
    print(
        f"af.ArrayModule : {fast_traces:4d} trace  in {STEPS} steps, "
        f"{fast_time / STEPS * 1e3:7.3f} ms/step "
        f"({fast_time:.2f} s for {STEPS} steps), x = {int(fast.x)}"
    )
    print(f"speed-up per step: {plain_per_step / (fast_time / STEPS):.0f}x")
    assert fast_traces == 1 and int(fast.x) == STEPS


if __name__ == "__main__":
    main()
