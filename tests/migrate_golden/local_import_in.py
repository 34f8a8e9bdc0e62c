import equinox as eqx
import jax


def default_field():
    import arrayfield as af

    return af.field(convert=False)


class Camera(eqx.Module):
    focus: jax.Array
