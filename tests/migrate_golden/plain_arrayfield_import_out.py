from arrayfield import ArrayModule
from jax import Array


class Lens(ArrayModule):
    einstein_radius: Array
