import equinox as eqx
import jax


class Scene(  # a whole scene
    eqx.Module,  # base class
    # keyword arguments to the metaclass follow
    strict=True,
):
    sources: list
    sky: jax.Array


class Compact(eqx.Module  # trailing comment in the bases
):
    level: jax.Array
