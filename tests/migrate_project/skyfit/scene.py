"""A scene: sources, a renderer and the parameters fitted to an image."""

import jax.numpy as jnp

from .base import Module
from .morphology import SersicMorphology
from .params import make_parameters
from .renderer import Renderer
from .source import Source
from .wcs import WCS


class Scene(Module):
    sources: tuple
    renderer: Renderer
    parameters: Module

    def model(self, parameters):
        image = self.renderer(self.sources)
        return parameters.amplitude * image + parameters.offset


def build_scene(index, shape=(16, 16)):
    """The `index`-th scene of a survey: same structure, new numbers."""
    wcs = WCS(pixel_scale=0.2 + 0.01 * index, origin=jnp.zeros(2))
    source = Source(
        name=f"source_{index}",
        flux=1.0 + index,
        position=[1.6, 1.6],
        morphology=SersicMorphology(n=1.0 + 0.5 * index, size=2.0 + index),
        image_shape=shape,
        wcs=wcs,
    )
    renderer = Renderer(shape, background=0.1 * index)
    parameters = make_parameters({"amplitude": 1.0 + index, "offset": 0.0})
    return Scene(sources=(source,), renderer=renderer, parameters=parameters)
