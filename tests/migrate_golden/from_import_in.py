from equinox import Module, field
from jax import Array
import jax.numpy as jnp


class Renderer(Module):
    gain: Array = field(converter=jnp.asarray)
    oversampling: int = field(static=True)


def is_renderer(x: object) -> bool:
    return isinstance(x, Renderer)
