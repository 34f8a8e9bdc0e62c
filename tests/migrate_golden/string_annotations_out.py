from typing import Optional

import arrayfield as af
import equinox as eqx
import jax
from jaxtyping import Array, Float


class Sky(af.ArrayModule):
    level: af.Field["jax.Array"]
    tilt: af.Field["Float[Array, '2']"]
    mask: af.Field[Optional["jax.Array"]] = eqx.field(default=None)
    label: "str" = eqx.field(converter=str)
