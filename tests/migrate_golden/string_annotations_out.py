from typing import Optional

import arrayfield as af
import equinox as eqx
import jax
from jaxtyping import Array, Float


class Sky(af.ArrayModule):
    level: "jax.Array"
    tilt: "Float[Array, '2']"
    mask: Optional["jax.Array"] = eqx.field(default=None)
    label: "str" = eqx.field(converter=str)
