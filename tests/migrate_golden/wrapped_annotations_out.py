import typing
from typing import Annotated, Optional, Union

import arrayfield as af
import equinox as eqx
import jax
import jax.numpy as jnp


class Fit(af.ArrayModule):
    a: Optional[jax.Array]
    b: jax.Array | None
    c: Union[jax.Array, None]
    d: Annotated[jax.Array, "per pixel"]
    e: typing.Optional[jax.Array]
    # May hold a Python float on purpose: left alone.
    f: Union[jax.Array, float] = eqx.field(converter=jnp.asarray)
