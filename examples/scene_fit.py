"""The scenario from the user report: a counter that starts as a Python `0` and is
stepped 3000 times through an `eqx.filter_jit` function, three ways side by side.

- a plain `eqx.Module` holding the Python int, as in the report: `filter_jit`
  hashes the int into its cache key, so every step traces and compiles again;
- the hand fix on a plain Module: a `jnp.asarray` converter on the field;
- `af.ArrayModule`, the report's class with only its base class changed.

Each row counts the traces, times the first step (which traces and compiles)
apart from the steps after it, and the summary compares the later steps only, so
that one compile is not spread over them. The last line times a warm step on
`af.ArrayModule` under `af.filter_jit`, `eqx.filter_jit` and `jax.jit`.

Run: python examples/scene_fit.py
"""

import os
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import arrayfield as af

STEPS = 3000
SLOW_STEPS = 150  # the recompiling variant runs a prefix only, as benchmarks/run.py


class PlainScene(eqx.Module):
    x: np.array  # annotated like the report, but holds a Python int

    def __init__(self):
        self.x = 0


class HandFixedScene(eqx.Module):
    x: jax.Array = eqx.field(converter=jnp.asarray)  # the fix users write by hand


class Scene(af.ArrayModule):  # the report's class; the base class is the only change
    x: np.array

    def __init__(self):
        self.x = 0


VARIANTS = {
    "eqx.Module, x = 0": (PlainScene, SLOW_STEPS),
    "eqx.Module, jnp.asarray converter": (lambda: HandFixedScene(x=0), STEPS),
    "af.ArrayModule, x = 0": (Scene, STEPS),
}


def make_step(jit=eqx.filter_jit):
    traces = []

    @jit
    def step(scene, x):
        traces.append(1)  # a Python side effect: runs only while tracing
        return jax.tree_util.tree_map(lambda s: s + x, scene)

    return step, traces


def fit(scene, steps, step):
    """Run `steps` steps: the final scene and the seconds they took."""
    start = time.perf_counter()
    for _ in range(steps):
        scene = step(scene, 1)
    jax.block_until_ready(scene)
    return scene, time.perf_counter() - start


def side_by_side(rounds=10):
    """Per variant: its traces, its first step's seconds, and seconds per later
    step in each round.

    After each variant's first step, the later steps run in rounds, the variants
    taking turns, so a busy neighbour on the machine slows all of them alike.
    """
    jax.block_until_ready(jax.jit(lambda v: v + 1)(0))  # JAX's own first-use costs
    runs = {}
    for name, (make_scene, steps) in VARIANTS.items():
        step, traces = make_step()
        scene, first = fit(make_scene(), 1, step)
        runs[name] = {
            "step": step,
            "traces": traces,
            "scene": scene,
            "first": first,
            "later": [],
            "left": steps - 1,
        }
    for r in range(rounds):
        for run in runs.values():
            size = run["left"] // (rounds - r)
            run["scene"], seconds = fit(run["scene"], size, run["step"])
            run["later"].append(seconds / size)
            run["left"] -= size
    return runs


def per_step_us(rounds=7, steps=300):
    """Median us per warm step under each jit, the three interleaved round by round."""
    jits = {"af.filter_jit": af.filter_jit, "eqx.filter_jit": eqx.filter_jit}
    jits["jax.jit"] = jax.jit
    steps_by_jit = {name: make_step(jit) for name, jit in jits.items()}
    times = {name: [] for name in jits}
    for _ in range(rounds):
        for name, (step, traces) in steps_by_jit.items():
            fit(Scene(), 1, step)  # compile outside the timing
            scene, seconds = fit(Scene(), steps, step)
            assert len(traces) == 1 and int(scene.x) == steps
            times[name].append(seconds / steps * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


def _later(seconds):
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"


def main():
    print(
        f"{STEPS} steps of scene = step(scene, 1) under eqx.filter_jit "
        f"(the plain Module: its first {SLOW_STEPS} steps)\n"
    )
    print(f"{'':35} {'traces':>12}  {'first step':>10}  {'each later step':>15}")
    later = {}
    runs = side_by_side()
    for name, run in runs.items():
        steps = VARIANTS[name][1]
        assert int(run["scene"].x) == steps
        later[name] = statistics.median(run["later"])
        traces = f"{len(run['traces'])} in {steps}"
        print(
            f"{name:35} {traces:>12}  "
            f"{run['first'] * 1e3:7.1f} ms  {_later(later[name]):>15}"
        )
    plain, _, ours = later.values()
    hand_rounds, our_rounds = (runs[name]["later"] for name in list(VARIANTS)[1:])
    # Paired round by round: a round slowed by a neighbour slows both alike.
    ratio = statistics.median(
        o / h for o, h in zip(our_rounds, hand_rounds, strict=True)
    )
    print(
        f"\nper later step, af.ArrayModule is {plain / ours:.0f}x faster than "
        f"eqx.Module (quotient of the medians) and takes {ratio:.2f}x the hand "
        "fix's time (median of per-round ratios, the rounds run side by side, so "
        "not the quotient of the two medians above); the first step of each "
        "traces and compiles. This run measures this machine; the README's table "
        "is benchmarks/run.py's, from benchmarks/results/results.json."
    )
    us = per_step_us()
    print(
        "us per warm step on af.ArrayModule: "
        + " | ".join(f"{name} {value:.1f}" for name, value in us.items())
    )


if __name__ == "__main__":
    main()
