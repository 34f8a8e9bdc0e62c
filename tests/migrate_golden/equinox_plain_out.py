import arrayfield as af
import jax
import jax.numpy


class Morphology(af.ArrayModule):
    radius: af.Field[jax.Array]
    index: jax.Array
