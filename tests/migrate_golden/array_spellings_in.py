import equinox as eqx
import jax
import jax.numpy as jnp
import jaxtyping as jt
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float32, Int, Shaped, UInt8


class Everything(eqx.Module):
    a: jax.Array = eqx.field(converter=jnp.asarray)
    b: jnp.ndarray = eqx.field(converter=jnp.asarray)
    c: np.ndarray = eqx.field(converter=np.asarray)
    d: ArrayLike = eqx.field(converter=jnp.asarray)
    e: jnp.array = eqx.field(converter=jnp.asarray)
    f: np.array = eqx.field(converter=np.array)
    g: Float32[Array, "n"] = eqx.field(converter=jnp.asarray)
    h: Int[Array, ""] = eqx.field(converter=jnp.asarray)
    i: Shaped[Array, "..."] = eqx.field(converter=jnp.asarray)
    j: Bool[Array, "n"] = eqx.field(converter=jnp.asarray)
    k: UInt8[np.ndarray, "h w"] = eqx.field(converter=np.asarray)
    m: jt.Float[jt.Array, ""] = eqx.field(converter=jnp.asarray)
    n: jax.typing.ArrayLike = eqx.field(converter=jnp.asarray)
    # Not array annotations: the converter stays.
    o: list = eqx.field(converter=jnp.asarray)
    p: jt.PyTree = eqx.field(converter=jnp.asarray)
    q: Float32[Unknown, ""] = eqx.field(converter=jnp.asarray)
