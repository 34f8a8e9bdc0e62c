import equinox as eqx
import jax
import jax.numpy as jnp


class A(eqx.Module):
    """Comments around a dropped converter stay where a reader finds them."""

    grid: jax.Array = eqx.field(  # pixel grid, in arcsec
        converter=jnp.asarray
    )
    z: jax.Array = eqx.field(
        default=0.0,  # zero point: calibrated 2024-01
        converter=jnp.asarray,
    )
    y: jax.Array = eqx.field(
        converter=jnp.asarray,  # converted
        default=1.0,  # one
    )
    w: jax.Array = eqx.field(
        default=2.0,  # two
        converter=jnp.asarray  # no trailing comma
    )
    v: jax.Array = eqx.field(default=3.0, converter=jnp.asarray)
    u: jax.Array = eqx.field(static=False, converter=jnp.asarray, default=3.0)
    t: jax.Array = eqx.field(
        static=False,
        converter=jnp.asarray,  # in the middle
        default=4.0,
    )
