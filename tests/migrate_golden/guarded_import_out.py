import arrayfield as af
import jax

try:
    import equinox as eqx  # noqa: F401
except ImportError:  # equinox is optional for this module's other users
    raise


class Model(af.ArrayModule):
    x: jax.Array
