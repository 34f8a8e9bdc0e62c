from equinox import Module as M
from jaxtyping import Array, Float


class Psf(M):
    fwhm: Float[Array, ""]


class Background(M):
    level: Float[Array, ""]
