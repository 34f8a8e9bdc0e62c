import arrayfield as af
import jax


class Scene(  # a whole scene
    af.ArrayModule,  # base class
    # keyword arguments to the metaclass follow
    strict=True,
):
    sources: list
    sky: jax.Array


class Compact(af.ArrayModule  # trailing comment in the bases
):
    level: jax.Array
