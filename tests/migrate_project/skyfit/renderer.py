"""Sums sources into an image."""

import equinox as eqx
import jax.numpy as jnp

Base = eqx.Module


class Renderer(Base):
    shape: tuple
    oversample: int
    background: float
    transform: object

    def __init__(self, shape, background, oversample=1):
        self.shape = shape
        self.background = background
        self.oversample = oversample
        self.transform = lambda image: jnp.clip(image, 0.0)

    def __call__(self, sources):
        image = jnp.zeros(self.shape) + self.background
        for _ in range(self.oversample):
            for source in sources:
                image = image + source.render(self.shape) / self.oversample
        return self.transform(image)
