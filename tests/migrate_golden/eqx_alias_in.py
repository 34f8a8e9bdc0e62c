"""A scene model written against plain equinox."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import equinox as eqx


class Source(eqx.Module):
    # Flux in counts; callers pass Python floats.
    flux: jax.Array = eqx.field(converter=jnp.asarray)
    position: jax.Array = eqx.field(converter=jnp.array, static=False)
    size: jax.Array = eqx.field(default=1.0, converter=jnp.asarray)  # arcsec
    angle: jax.Array = eqx.field(
        converter=jnp.asarray,
        metadata={"unit": "rad"},
    )
    name: str = eqx.field(static=True)


def render(source: Source) -> jax.Array:
    return source.flux * jnp.ones((3, 3))
