import arrayfield as af
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxtyping as jt
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float32, Int, Shaped, UInt8


class Everything(af.ArrayModule):
    a: af.Field[jax.Array]
    b: af.Field[jnp.ndarray]
    c: af.Field[np.ndarray]
    d: ArrayLike = eqx.field(converter=jnp.asarray)
    e: af.Field[jnp.ndarray]
    f: af.Field[np.ndarray]
    g: af.Field[Float32[Array, "n"]]
    h: af.Field[Int[Array, ""]]
    i: af.Field[Shaped[Array, "..."]]
    j: af.Field[Bool[Array, "n"]]
    k: af.Field[UInt8[np.ndarray, "h w"]]
    m: af.Field[jt.Float[jt.Array, ""]]
    n: jax.typing.ArrayLike = eqx.field(converter=jnp.asarray)
    # Not array annotations: the converter stays.
    o: list = eqx.field(converter=jnp.asarray)
    p: jt.PyTree = eqx.field(converter=jnp.asarray)
    q: Float32[Unknown, ""] = eqx.field(converter=jnp.asarray)
