import functools

import arrayfield as af
import jax


def registered(cls):
    return cls


@registered
@functools.total_ordering
class Spectrum(af.ArrayModule):
    peak: jax.Array

    def __lt__(self, other):
        return bool(self.peak < other.peak)
