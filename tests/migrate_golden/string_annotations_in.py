from typing import Optional

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


class Sky(eqx.Module):
    level: "jax.Array" = eqx.field(converter=jnp.asarray)
    tilt: "Float[Array, '2']" = eqx.field(converter=jnp.asarray)
    mask: Optional["jax.Array"] = eqx.field(default=None, converter=jnp.asarray)
    label: "str" = eqx.field(converter=str)
