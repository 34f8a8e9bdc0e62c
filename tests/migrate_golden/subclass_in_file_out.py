import arrayfield as af
import equinox as eqx
import jax
import jax.numpy as jnp


class Base(af.ArrayModule):
    offset: jax.Array


class Child(Base):
    gain: af.Field[jax.Array]


class GrandChild(Child):
    bias: af.Field[jax.Array]


class Unknown(SomethingElse):
    bias: jax.Array = eqx.field(converter=jnp.asarray)
