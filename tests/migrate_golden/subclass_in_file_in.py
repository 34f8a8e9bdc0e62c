import equinox as eqx
import jax
import jax.numpy as jnp


class Base(eqx.Module):
    offset: jax.Array


class Child(Base):
    gain: jax.Array = eqx.field(converter=jnp.asarray)


class GrandChild(Child):
    bias: jax.Array = eqx.field(converter=jnp.asarray)


class Unknown(SomethingElse):
    bias: jax.Array = eqx.field(converter=jnp.asarray)
