import typing
from typing import Annotated, Optional, Union

import arrayfield as af
import equinox as eqx
import jax
import jax.numpy as jnp


class Fit(af.ArrayModule):
    a: af.Field[Optional[jax.Array]]
    b: af.Field[jax.Array | None]
    c: af.Field[Union[jax.Array, None]]
    d: af.Field[Annotated[jax.Array, "per pixel"]]
    e: af.Field[typing.Optional[jax.Array]]
    # A union that names a Python number keeps numbers as they are: kept.
    f: Union[jax.Array, float] = eqx.field(converter=jnp.asarray)
    # A union with another type is for a human to read: left alone.
    g: Union[jax.Array, str] = eqx.field(converter=jnp.asarray)
