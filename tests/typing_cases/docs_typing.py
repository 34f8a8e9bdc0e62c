import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

import arrayfield as af


class Scene(af.ArrayModule):
    x: af.Field[Float[Array, "n"]]
    steps: af.Field[Int[Array, ""]] = af.field(default=0)
    name: str = "scene"


scene = Scene(x=[0.0, 1.0])  # also x=1.5, x=np.zeros(3), x=jnp.ones(2)
Scene(x=np.zeros(3), steps=2)
assert scene.x.dtype == jnp.float32  # scene.x is an Array to the checker
doubled = scene.x * 2 + scene.steps
