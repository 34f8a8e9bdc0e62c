import arrayfield as af
import jax

try:
    import equinox as eqx
except ImportError:  # equinox is optional for this module's other users
    raise


class Model(af.ArrayModule):
    x: jax.Array
