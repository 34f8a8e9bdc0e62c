"""What a user writes with af.Field: clean in all four modes.

The one exception is JAX's own: pyright's strict mode finds its array constructors
(`jnp.zeros`, `jnp.asarray`, ...) partially unknown, with or without arrayfield.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

import arrayfield as af


class Scene(af.ArrayModule):
    x: af.Field[Float[Array, ""]]
    position: af.Field[Float[Array, "2"]]
    pixels: af.Field[Float[np.ndarray, "h w"]]
    shape: tuple[int, int] = af.field(convert=False, static=True)
    steps: af.Field[Int[Array, ""]] = af.field(default=0)
    weight: af.Field[Float[Array, ""]] = af.field(dtype=jnp.float16, default=1.0)
    mask: af.Field[Float[Array, "n"] | None] = af.field(default=None)
    name: str = "scene"


def make(x: float) -> Scene:
    return Scene(x=x, position=(0.5, 1.5), pixels=[[0.0]], shape=(64, 64))


Scene(x=0, position=[0.0, 1.0], pixels=np.zeros((2, 2)), shape=(1, 1))
Scene(x=1.5, position=np.zeros(2), pixels=[[1, 2], [3, 4]], shape=(1, 1))
zeros = jnp.zeros(2)  # expect: pyright-strict=reportUnknownMemberType
Scene(x=True, position=zeros, pixels=np.ones((1, 1)), shape=(1, 1))
Scene(x=np.float32(2), position=[1, 2], pixels=[[0.0]], shape=(1, 1), steps=3)
Scene(x=jnp.float32(0), position=(1, 2), pixels=[[0]], shape=(1, 1), mask=None)
scene = make(2.0)

# Reading a field gives the array type.
x: Array = scene.x
pixels: np.ndarray = scene.pixels
dtype = scene.x.dtype
doubled: Array = scene.x * 2 + scene.steps
total = float(jnp.sum(scene.position))
shape: tuple[int, ...] = scene.pixels.shape
mask: Array | None = scene.mask

# Everything equinox and dataclasses do with the class still type-checks.
replaced = dataclasses.replace(scene, name="other")
scene = af.normalize(scene)


class Checked(af.ArrayModule, check=True):
    flux: af.Field[Float[Array, "n"]]


class Child(Scene):  # inherits every field, adds one
    extra: af.Field[Float[Array, ""]] = af.field(default=0.0)


Checked(flux=[1.0, 2.0])
Child(x=0, position=[0, 0], pixels=[[0]], shape=(1, 1), extra=2)


class Custom(af.ArrayModule):
    """A custom __init__ assigns numbers: arrayfield converts them afterwards."""

    rate: af.Field[Float[Array, ""]]

    def __init__(self, rate: float) -> None:
        self.rate = rate


rate: Array = Custom(rate=0.1).rate


@eqx.filter_jit
def energy(scene: Scene) -> Array:
    return jnp.sum(scene.position**2) * scene.x
