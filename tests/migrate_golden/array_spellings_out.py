import arrayfield as af
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxtyping as jt
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float32, Int, Shaped, UInt8


class Everything(af.ArrayModule):
    a: jax.Array
    b: jnp.ndarray
    c: np.ndarray
    d: ArrayLike = eqx.field(converter=jnp.asarray)
    e: jnp.array
    f: np.array
    g: Float32[Array, "n"]
    h: Int[Array, ""]
    i: Shaped[Array, "..."]
    j: Bool[Array, "n"]
    k: UInt8[np.ndarray, "h w"]
    m: jt.Float[jt.Array, ""]
    n: jax.typing.ArrayLike = eqx.field(converter=jnp.asarray)
    # Not array annotations: the converter stays.
    o: list = eqx.field(converter=jnp.asarray)
    p: jt.PyTree = eqx.field(converter=jnp.asarray)
    q: Float32[Unknown, ""] = eqx.field(converter=jnp.asarray)
