"""Per-step dispatch: `af.filter_jit` vs `eqx.filter_jit` vs `jax.jit`.

Each case runs a warm step function as a loop does (the step's output is the next
step's input) under the three jits in one process. Every round times all three
back to back, rotating which goes first; the table reports
the median time of each and the median of the per-round ratios. `run.py` adds
these rows to its table; `python benchmarks/dispatch.py [--quick]` prints them
alone.
"""

from __future__ import annotations

import functools
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

import arrayfield as af

JITS: dict[str, Callable[..., Any]] = {
    "af": af.filter_jit,
    "eqx": eqx.filter_jit,
    "jax": jax.jit,
}


def time_three(
    steps: dict[str, Callable[[], Any]], *, number: int, rounds: int
) -> dict[str, Any]:
    """Median us per call of each step, and per-round paired ratios to the others."""
    for step in steps.values():  # compile and warm
        for _ in range(max(1, number // 10)):
            step()
    names = list(steps)
    times: dict[str, list[float]] = {name: [] for name in names}
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                step = steps[name]
                start = time.perf_counter()
                for _ in range(number):
                    step()
                times[name].append((time.perf_counter() - start) / number * 1e6)
    finally:
        if gc_was_enabled:
            gc.enable()

    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(times[a], times[b], strict=True))

    return {
        "us": {name: statistics.median(t) for name, t in times.items()},
        # The least disturbed round of each, for a machine shared with other jobs.
        "best": {name: min(t) for name, t in times.items()},
        "af/jax": ratio("af", "jax") if "jax" in times else None,
        "af/eqx": ratio("af", "eqx"),
    }


# -- the cases -----------------------------------------------------------------


class SeedScene(af.ArrayModule):
    """The seed report's scene on ArrayModule: `x = 0` is stored as an int32 array."""

    x: Int[Array, ""]


def seed_step(scene, increment):
    return jax.tree_util.tree_map(lambda s: s + increment, scene)


class Morphology(af.ArrayModule):
    size: Float[Array, ""]
    profile: str = af.field(static=True, default="gaussian")


class Source(af.ArrayModule):
    flux: Float[Array, ""]
    centre: Float[Array, " xy"]
    morph: Morphology


class Scene(af.ArrayModule):
    sources: list[Source]
    learning_rate: Float[Array, ""]


def make_scene(n_sources: int) -> Scene:
    """`n_sources` sources of 3 leaves each, plus the learning rate."""
    return Scene(
        sources=[
            Source(
                flux=1.0 + i,
                centre=jnp.array([0.1 * i, -0.1 * i]),
                morph=Morphology(size=1.0 + 0.01 * i),
            )
            for i in range(n_sources)
        ],
        learning_rate=0.01,
    )


def scene_step(scene: Scene, pixels: jax.Array) -> tuple[Scene, jax.Array]:
    """A light update of every source: the step's cost is mostly dispatch."""
    sources = jax.tree_util.tree_map(
        lambda p: p - scene.learning_rate * (p - jnp.mean(pixels)), scene.sources
    )
    return eqx.tree_at(lambda s: s.sources, scene, sources), pixels


def counted(fn: Callable[..., Any], traces: list[int]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def traced(*args: Any, **kwargs: Any) -> Any:
        traces.append(1)  # runs only while tracing
        return fn(*args, **kwargs)

    return traced


def _case(
    make_args: Callable[[], tuple],
    fn: Callable[..., Any],
    jits: dict[str, Callable[..., Any]],
    number: int,
    rounds: int,
) -> dict[str, Any]:
    """Time `fn` as a loop does: each step's (first) output is the next step's input."""
    traces: dict[str, list[int]] = {name: [] for name in jits}
    steps = {}
    for name, jit in jits.items():
        state = list(make_args())
        jitted = jit(counted(fn, traces[name]))

        def step(jitted=jitted, state=state) -> None:
            out = jitted(*state)
            state[0] = out[0] if isinstance(out, tuple) else out

        steps[name] = step
    result = time_three(steps, number=number, rounds=rounds)
    # Every jit traces once, however many steps it ran: an exact count.
    return {**result, "traces": {name: len(t) for name, t in traces.items()}}


def measure(quick: bool) -> list[dict[str, Any]]:
    """Each case: its name, leaf count, the three medians and the two ratios."""
    rounds = 7 if quick else 31
    pixels = jnp.linspace(0.0, 1.0, 32)
    found = []
    cases: list[tuple[str, Callable[[], tuple], Callable[..., Any], int]] = [
        (
            "seed loop: scene = step(scene, 1)",
            lambda: (SeedScene(x=0), 1),
            seed_step,
            300,
        ),
        (
            SEED_ARRAY,
            lambda: (SeedScene(x=0), jnp.array(1)),
            seed_step,
            300,
        ),
        ("5-source scene step", lambda: (make_scene(5), pixels), scene_step, 200),
        (
            "100-source scene step",
            lambda: (make_scene(100), pixels),
            scene_step,
            30,
        ),
    ]
    for name, make_args, fn, number in cases:
        result = _case(make_args, fn, JITS, number // 3 if quick else number, rounds)
        leaves = len(jax.tree_util.tree_leaves(make_args()))
        found.append({"case": name, "leaves": leaves - 1, **result})
    # The fallback: jit options, which af.filter_jit passes to eqx.filter_jit on
    # every call. No jax.jit column: with the options it is eqx's work.
    with_options = {
        name: functools.partial(JITS[name], inline=False) for name in ("af", "eqx")
    }
    result = _case(
        lambda: (make_scene(5), pixels),
        scene_step,
        with_options,
        70 if quick else 200,
        rounds,
    )
    found.append({"case": FALLBACK, "leaves": 16, **result})
    return found


FALLBACK = "fallback (jit options), 5-source step"
# The increment as an array: jax.jit then has no Python number to convert per
# call, so af.filter_jit's own per-call work is all that tells the two apart.
SEED_ARRAY = "seed loop, array increment: scene = step(scene, jnp.array(1))"
TARGETS = {  # case -> (ratio key, bound)
    "seed loop: scene = step(scene, 1)": ("af/jax", 1.3),
    SEED_ARRAY: ("af/jax", 1.3),
    "5-source scene step": ("af/jax", 1.2),
    FALLBACK: ("af/eqx", 1.05),
}


def markdown(found: list[dict[str, Any]]) -> str:
    lines = [
        "| case (us per step) | scene leaves | af.filter_jit | eqx.filter_jit "
        "| jax.jit | af / jax | af / eqx | best rounds: af, eqx, jax | target |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for f in found:
        us = f["us"]
        target = TARGETS.get(f["case"])
        if target is None:
            verdict = "report"
        else:
            key, bound = target
            verdict = f"{key} <= {bound}: {'pass' if f[key] <= bound else 'MISS'}"
        jax_us = f"{us['jax']:.1f}" if "jax" in us else "-"
        af_jax = f"{f['af/jax']:.2f}x" if f["af/jax"] is not None else "-"
        lines.append(
            f"| {f['case']} | {f['leaves']} | {us['af']:.1f} | {us['eqx']:.1f} "
            f"| {jax_us} | {af_jax} | {f['af/eqx']:.2f}x "
            f"| {', '.join(f'{v:.1f}' for v in f['best'].values())} | {verdict} |"
        )
    return "\n".join(lines)


def main(quick: bool) -> list[dict[str, Any]]:
    return measure(quick)


if __name__ == "__main__":
    print(markdown(main("--quick" in sys.argv[1:])))
