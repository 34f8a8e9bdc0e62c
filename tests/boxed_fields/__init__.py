"""Fields whose sources sit in boxes at per-field origins (scarlet2's rendering).

Each source is rendered in its box and added into the frame at a Python-int
origin, a static field, as the client does: the source's centre (in frame
pixels, a fitted array) is taken relative to the box at `centre - origin`,
which JAX embeds as float literals, and the box is added in with
`frame.at[:, oy:oy + h, ox:ox + w].add(box)`, whose start vector `jnp` builds
from integer literals (and whose gradient slices at those starts). Every field
puts its sources elsewhere, so under every jit each field traces to a program
of its own, and those programs differ only in those numbers. A source at the
frame's right edge gets a clipped box (`CLIPPED` columns fewer, every
`CLIPPED_EVERY`th field): another shape, rightly another program.
`fit_fields(jit, K, steps)` fits K fields with an optax step under one jitted
step (`tests/many_fields`' `Fitter`) and counts its traces and XLA compiles;
`tests/test_numbers.py` holds the exact counts, `benchmarks/field_numbers.py`
the timings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float

import arrayfield as af
from many_fields import FieldRun, Fitter

BANDS = 2
FRAME = 64
BOX = 15
SOURCES = 4
CLIPPED = 2  # columns a source at the frame's edge loses
CLIPPED_EVERY = 4  # field 3, 7, ...: its last source sits at the edge
OPTIMIZER = optax.adam(0.05)


class Source(af.ArrayModule):
    flux: Float[Array, " bands"]
    centre: Float[Array, " 2"]  # in the frame's pixels
    size: Float[Array, ""]
    origin: tuple[int, int] = eqx.field(static=True)  # the box's corner in the frame
    shape: tuple[int, int] = eqx.field(static=True, default=(BOX, BOX))


class Scene(af.ArrayModule):
    sources: list[Source]


def render(scene: Scene) -> jax.Array:
    """The model frame, `(bands, FRAME, FRAME)`: each source's box added in."""
    frame = jnp.zeros((BANDS, FRAME, FRAME))
    for source in scene.sources:
        h, w = source.shape
        grid = jnp.stack(jnp.meshgrid(jnp.arange(h), jnp.arange(w), indexing="ij"))
        oy, ox = source.origin
        # The centre in the box's pixels: the origin enters as float literals.
        local = jnp.stack([source.centre[0] - oy, source.centre[1] - ox])
        offset = grid - local[:, None, None]
        blob = jnp.exp(-jnp.sum(offset**2, axis=0) / (2 * source.size**2))
        frame = frame.at[:, oy : oy + h, ox : ox + w].add(
            source.flux[:, None, None] * blob
        )
    return frame


def loss(scene: Scene, data: jax.Array) -> jax.Array:
    return 0.5 * jnp.sum((render(scene) - data) ** 2)


def step(scene: Scene, opt_state: Any, data: jax.Array) -> tuple[Scene, Any, Any]:
    value, grads = eqx.filter_value_and_grad(loss)(scene, data)
    updates, opt_state = OPTIMIZER.update(grads, opt_state)
    return eqx.apply_updates(scene, updates), opt_state, value


def build_scene(field: int, box: int = BOX, truth: bool = False) -> Scene:
    """One field's scene: its sources at seeded origins, starting off the truth
    (or at it, with `truth`); in every `CLIPPED_EVERY`th field the last source
    sits at the frame's right edge, its box clipped."""
    rng = np.random.default_rng(field)
    sources = []
    for i in range(SOURCES):
        flux = rng.uniform(1.0, 3.0, BANDS)
        centre = rng.uniform(box / 3, 2 * box / 3, 2)
        size = rng.uniform(1.5, 2.5)
        oy, ox = (int(v) for v in rng.integers(0, FRAME - box + 1, 2))
        shape = (box, box)
        if i == SOURCES - 1 and field % CLIPPED_EVERY == CLIPPED_EVERY - 1:
            ox, shape = FRAME - box + CLIPPED, (box, box - CLIPPED)
        if not truth:
            flux, centre = flux * 0.7, centre + 0.5
        sources.append(
            Source(
                flux=flux.astype(np.float32),
                centre=(centre + np.array([oy, ox])).astype(np.float32),
                size=float(size),
                origin=(oy, ox),
                shape=shape,
            )
        )
    return Scene(sources=sources)


def observed(field: int, box: int = BOX) -> jax.Array:
    """The field's data: its true scene rendered, with seeded noise."""
    noise = np.random.default_rng(1000 + field).normal(0.0, 0.05, (FRAME, FRAME))
    return render(build_scene(field, box, truth=True)) + jnp.asarray(noise, jnp.float32)


def fit_fields(
    jit: Callable[..., Any], fields: int, steps: int, box: int = BOX
) -> tuple[list[FieldRun], int, int]:
    """Each field's fit, and how many times the step traced and compiled."""
    fitter = Fitter(jit, step, OPTIMIZER)
    try:
        runs = [
            fitter.fit(build_scene(field, box), observed(field, box), steps)
            for field in range(fields)
        ]
    finally:
        fitter.close()
    return runs, fitter.traces, fitter.compiles
