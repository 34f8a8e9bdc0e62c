import arrayfield as af
import equinox as eqx
import jax
import jax.numpy as jnp


class Outer(af.ArrayModule):
    class Inner(af.ArrayModule):
        depth: af.Field[jax.Array]

    inner: "Outer.Inner"
    scale: jax.Array


def make_model(n: int) -> eqx.Module:
    class Local(af.ArrayModule):
        weights: af.Field[jax.Array]

    return Local(jnp.zeros(n))
