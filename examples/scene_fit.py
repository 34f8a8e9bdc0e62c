"""The scenario from the user report: a counter that starts as a Python `0` and is
stepped 3000 times through an `eqx.filter_jit` function.

On `eqx.Module` every step sees a new Python int, which `filter_jit` hashes into its
cache key: one trace (and one XLA compile) per step. On `af.ArrayModule` the counter
is an int32 array from the start: one trace in total.

The last line compares the per-step cost of the three jits on the warm
ArrayModule loop: `af.filter_jit` (a drop-in for `eqx.filter_jit` with a shorter
path to `jax.jit`), `eqx.filter_jit` and a hand-written `jax.jit`.

Run: python examples/scene_fit.py
"""

import os
import statistics
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


def make_step(jit=eqx.filter_jit):
    traces = []

    @jit
    def step(scene, x):
        traces.append(1)  # a Python side effect: runs only while tracing
        return jax.tree_util.tree_map(lambda s: s + x, scene)

    return step, traces


def fit(scene, steps, step):
    start = time.perf_counter()
    for _ in range(steps):
        scene = step(scene, 1)
    jax.block_until_ready(scene)
    return scene, time.perf_counter() - start


def per_step_us(rounds=7, steps=300):
    """Median us per warm step under each jit, the three interleaved round by round."""
    jits = {"af.filter_jit": af.filter_jit, "eqx.filter_jit": eqx.filter_jit}
    jits["jax.jit"] = jax.jit
    steps_by_jit = {name: make_step(jit) for name, jit in jits.items()}
    times = {name: [] for name in jits}
    for _ in range(rounds):
        for name, (step, traces) in steps_by_jit.items():
            scene, seconds = fit(Scene(), steps, step)
            assert len(traces) == 1 and int(scene.x) == steps
            times[name].append(seconds / steps * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    plain_step, plain_traces = make_step()
    plain, plain_time = fit(PlainScene(), SLOW_PREFIX, plain_step)
    fast_step, fast_traces = make_step()
    fast, fast_time = fit(Scene(), STEPS, fast_step)
    plain_per_step = plain_time / SLOW_PREFIX
    print(
        f"eqx.Module     : {len(plain_traces):4d} traces in {SLOW_PREFIX} steps, "
        f"{plain_per_step * 1e3:7.3f} ms/step "
        f"(~{plain_per_step * STEPS:.1f} s for {STEPS} steps), x = {plain.x}"
    )
    print(
        f"af.ArrayModule : {len(fast_traces):4d} trace  in {STEPS} steps, "
        f"{fast_time / STEPS * 1e3:7.3f} ms/step "
        f"({fast_time:.2f} s for {STEPS} steps), x = {int(fast.x)}"
    )
    print(f"speed-up per step: {plain_per_step / (fast_time / STEPS):.0f}x")
    assert len(fast_traces) == 1 and int(fast.x) == STEPS
    us = per_step_us()
    print(
        "us per warm step: "
        + " | ".join(f"{name} {value:.1f}" for name, value in us.items())
    )


if __name__ == "__main__":
    main()
