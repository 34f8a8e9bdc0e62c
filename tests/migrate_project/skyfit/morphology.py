"""Radial profiles."""

import jax.numpy as jnp

from . import base


class SersicMorphology(base.Module):
    n: float
    size: float

    def __call__(self, radius):
        return jnp.exp(-((radius / self.size) ** (1.0 / self.n)))
