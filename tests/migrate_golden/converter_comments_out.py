import arrayfield as af
import equinox as eqx
import jax


class A(af.ArrayModule):
    """Comments around a dropped converter stay where a reader finds them."""

    # pixel grid, in arcsec
    grid: af.Field[jax.Array]
    z: af.Field[jax.Array] = eqx.field(
        default=0.0,  # zero point: calibrated 2024-01
    )
    y: af.Field[jax.Array] = eqx.field(  # converted
        default=1.0,  # one
    )
    w: af.Field[jax.Array] = eqx.field(
        default=2.0  # two
        # no trailing comma
    )
    v: af.Field[jax.Array] = eqx.field(default=3.0)
    u: af.Field[jax.Array] = eqx.field(static=False, default=3.0)
    t: af.Field[jax.Array] = eqx.field(
        static=False,  # in the middle
        default=4.0,
    )
