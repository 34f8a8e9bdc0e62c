import equinox as eqx
import jax
import jax.numpy as jnp


class Empty(eqx.Module): pass


class One(eqx.Module): x: jax.Array = eqx.field(converter=jnp.asarray)
