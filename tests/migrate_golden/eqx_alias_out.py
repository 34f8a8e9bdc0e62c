"""A scene model written against plain equinox."""

from __future__ import annotations

import arrayfield as af
import jax
import jax.numpy as jnp

import equinox as eqx


class Source(af.ArrayModule):
    # Flux in counts; callers pass Python floats.
    flux: af.Field[jax.Array]
    position: af.Field[jax.Array] = eqx.field(static=False)
    size: af.Field[jax.Array] = eqx.field(default=1.0)  # arcsec
    angle: af.Field[jax.Array] = eqx.field(
        metadata={"unit": "rad"},
    )
    name: str = eqx.field(static=True)


def render(source: Source) -> jax.Array:
    return source.flux * jnp.ones((3, 3))
