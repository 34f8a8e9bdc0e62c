import arrayfield as af
import jax


def default_field():
    import arrayfield as af

    return af.field(convert=False)


class Camera(af.ArrayModule):
    focus: jax.Array
