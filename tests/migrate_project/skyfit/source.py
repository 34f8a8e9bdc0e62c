"""Sources: a morphology, a flux and a position, rendered on a padded grid."""

import functools

import jax.numpy as jnp

from skyfit import Module

from .morphology import SersicMorphology
from .wcs import WCS


def _get_fast_shape(shape, padding):
    # FFT-friendly sizes: even numbers at least `padding` larger.
    return [size + padding + (size + padding) % 2 for size in shape]


def _soften(radius, epsilon):
    return jnp.sqrt(radius**2 + epsilon**2)


class Source(Module):
    name: str
    flux: float
    position: jnp.ndarray
    morphology: SersicMorphology
    wcs: WCS
    soften: object
    _fft_shape: jnp.array

    def __init__(self, name, flux, position, morphology, image_shape, wcs):
        self.name = name
        self.flux = flux
        self.position = jnp.asarray(position)
        self.morphology = morphology
        self.wcs = wcs
        self.soften = functools.partial(_soften, epsilon=0.5)
        self._fft_shape = _get_fast_shape(image_shape, 4)

    def render(self, shape):
        ys, xs = jnp.indices(shape)
        centre = self.wcs.to_pixels(self.position)
        radius = self.soften(jnp.hypot(ys - centre[0], xs - centre[1]))
        image = self.flux * self.morphology(radius)
        # Convolve with a delta kernel on the padded grid, the way a PSF would be.
        kernel = jnp.zeros(self._fft_shape).at[0, 0].set(1.0)
        padded = jnp.fft.rfft2(image, s=self._fft_shape)
        smoothed = jnp.fft.irfft2(padded * jnp.fft.rfft2(kernel), s=self._fft_shape)
        return smoothed[: shape[0], : shape[1]]
