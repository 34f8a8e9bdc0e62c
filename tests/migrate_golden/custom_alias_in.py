import equinox as e
import jax


class Spectrum(e.Module, strict=True):
    amplitude: jax.Array
    slope: jax.Array = e.field(converter=jax.numpy.asarray)


@e.filter_jit
def evaluate(spectrum: Spectrum, wavelength: jax.Array) -> jax.Array:
    return spectrum.amplitude * wavelength**spectrum.slope
