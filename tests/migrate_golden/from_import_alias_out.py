import arrayfield as af
from jaxtyping import Array, Float


class Psf(af.ArrayModule):
    fwhm: Float[Array, ""]


class Background(af.ArrayModule):
    level: Float[Array, ""]
