import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

import arrayfield as af


class Scene(af.ArrayModule):
    brightness: float
    phase: complex = 0j
    steps: float = eqx.field(static=True)
    shape: Int[Array, "2"]
    grid: jax.Array
    index: jax.Array = (0, 1, 2)
    kernel: jax.Array = eqx.field(default=[3, 3])
    origin: jax.Array = (0.0, 0.0)
    lookup: jax.Array = eqx.field(static=True)
    table: jax.Array = eqx.field(converter=np.asarray)
    host: np.ndarray = eqx.field(converter=jnp.asarray)
    opted: jax.Array = af.field(convert=False)
    weights: Float[Array, "n"]

    def __init__(self, image: jax.Array, n: int):
        self.brightness = 1.0
        self.phase = 0j
        self.steps = 10.0
        self.shape = image.shape
        self.grid = (n, n)
        self.lookup = jnp.arange(n)
        self.table = np.zeros(n)
        self.host = np.zeros(n)
        self.opted = [n, n]
        self.weights = jnp.ones(n)


class NotAModule:
    brightness: float
