from arrayfield import ArrayModule
from equinox import Module
from jax import Array


class Lens(Module):
    einstein_radius: Array
