import equinox
import jax
import jax.numpy


class Morphology(equinox.Module):
    radius: jax.Array = equinox.field(converter=jax.numpy.asarray)
    index: jax.Array
