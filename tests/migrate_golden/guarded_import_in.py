import jax

try:
    import equinox as eqx
except ImportError:  # equinox is optional for this module's other users
    raise


class Model(eqx.Module):
    x: jax.Array
