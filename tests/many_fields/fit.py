"""Fit K fields one after another with a few optax steps each, under one jit.

`Fitter(jit)` jits one step function once; `fit_fields` builds every field's scene
first (they stay alive, so `id`-derived names never repeat) and runs `steps`
steps per field. The step counts its own traces, and times its first call (the
compile) apart from the others.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from .scene import NO_FIXES, Fixes, Scene, build_scene, observed, render

OPTIMIZER = optax.adam(0.05)


def loss(scene: Scene, data: jax.Array) -> jax.Array:
    residual = render(scene) - data
    prior = sum(source.prior.log_prob(source.flux) for source in scene.sources)
    return 0.5 * jnp.sum(residual**2) - prior


def step(scene: Scene, opt_state: Any, data: jax.Array) -> tuple[Scene, Any, Any]:
    """One optax step, each source's flux update scaled by its step size."""
    value, grads = eqx.filter_value_and_grad(loss)(scene, data)
    updates, opt_state = OPTIMIZER.update(grads, opt_state)
    scaled = [
        update.flux * source.step_size(source.flux) / 0.1
        for update, source in zip(updates.sources, scene.sources, strict=True)
    ]
    updates = eqx.tree_at(lambda u: [s.flux for s in u.sources], updates, scaled)
    return eqx.apply_updates(scene, updates), opt_state, value


@dataclasses.dataclass
class FieldRun:
    scene: Scene
    losses: list[float]
    first_call_s: float  # the first step: compile (if any) and run
    step_s: float  # the median of the other steps
    total_s: float  # every step of the field


COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


class Fitter:
    """One jitted step (`jit(step)`) for every field, counting its traces and its
    XLA compiles (JAX's backend-compile events for programs named after it).
    `step` and `optimizer` default to this package's; `tests/boxed_fields`
    passes its own."""

    def __init__(
        self,
        jit: Callable[..., Any],
        step: Callable[..., Any] = step,
        optimizer: Any = OPTIMIZER,
    ):
        self.traces = 0
        self.compiles = 0
        self.optimizer = optimizer

        def counted(scene, opt_state, data):
            self.traces += 1  # runs only while tracing
            return step(scene, opt_state, data)

        def on_event(event: str, duration: float, **kwargs: Any) -> None:
            if event == COMPILE_EVENT and "counted" in str(kwargs.get("fun_name")):
                self.compiles += 1

        self.listener = on_event
        jax.monitoring.register_event_duration_secs_listener(on_event)
        self.step = jit(counted)

    def close(self) -> None:
        jax.monitoring.unregister_event_duration_listener(self.listener)

    def fit(self, scene: Any, data: jax.Array, steps: int) -> FieldRun:
        opt_state = self.optimizer.init(eqx.filter(scene, eqx.is_inexact_array))
        losses, times = [], []
        for _ in range(steps):
            start = time.perf_counter()
            scene, opt_state, value = self.step(scene, opt_state, data)
            jax.block_until_ready(value)
            times.append(time.perf_counter() - start)
            losses.append(float(value))
        rest = sorted(times[1:]) or [0.0]
        return FieldRun(scene, losses, times[0], rest[len(rest) // 2], sum(times))


def fit_fields(
    jit: Callable[..., Any], fields: int, steps: int, fixes: Fixes = NO_FIXES
) -> tuple[list[FieldRun], int, int]:
    """Each field's run, and how many times the step traced and compiled for all
    of them."""
    built = [build_scene(field, fixes) for field in range(fields)]
    data = [observed(field) for field in range(fields)]
    fitter = Fitter(jit)
    try:
        runs = [
            fitter.fit(scene, image, steps)
            for (scene, _wcs), image in zip(built, data, strict=True)
        ]
    finally:
        fitter.close()
    return runs, fitter.traces, fitter.compiles
