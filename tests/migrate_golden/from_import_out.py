import arrayfield as af
from equinox import field
from jax import Array


class Renderer(af.ArrayModule):
    gain: af.Field[Array]
    oversampling: int = field(static=True)


def is_renderer(x: object) -> bool:
    return isinstance(x, Renderer)
