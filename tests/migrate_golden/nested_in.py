import equinox as eqx
import jax
import jax.numpy as jnp


class Outer(eqx.Module):
    class Inner(eqx.Module):
        depth: jax.Array = eqx.field(converter=jnp.asarray)

    inner: "Outer.Inner"
    scale: jax.Array


def make_model(n: int) -> eqx.Module:
    class Local(eqx.Module):
        weights: jax.Array = eqx.field(converter=jnp.asarray)

    return Local(jnp.zeros(n))
