import typing
from typing import Annotated, Optional, Union

import equinox as eqx
import jax
import jax.numpy as jnp


class Fit(eqx.Module):
    a: Optional[jax.Array] = eqx.field(converter=jnp.asarray)
    b: jax.Array | None = eqx.field(converter=jnp.asarray)
    c: Union[jax.Array, None] = eqx.field(converter=jnp.asarray)
    d: Annotated[jax.Array, "per pixel"] = eqx.field(converter=jnp.asarray)
    e: typing.Optional[jax.Array] = eqx.field(converter=jnp.asarray)
    # A union that names a Python number keeps numbers as they are: kept.
    f: Union[jax.Array, float] = eqx.field(converter=jnp.asarray)
    # A union with another type is for a human to read: left alone.
    g: Union[jax.Array, str] = eqx.field(converter=jnp.asarray)
