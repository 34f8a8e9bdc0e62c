import os; import equinox as eqx
from equinox import (
    field,
    Module,
)
import jax, jax.numpy as jnp


class A(eqx.Module):
    x: jax.Array = field(converter=jnp.asarray)


class B(Module):
    y: jax.Array


print(os.sep)
