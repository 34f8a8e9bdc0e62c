import arrayfield as af
import equinox as e
import jax


class Spectrum(af.ArrayModule, strict=True):
    amplitude: jax.Array
    slope: af.Field[jax.Array]


@e.filter_jit
def evaluate(spectrum: Spectrum, wavelength: jax.Array) -> jax.Array:
    return spectrum.amplitude * wavelength**spectrum.slope
