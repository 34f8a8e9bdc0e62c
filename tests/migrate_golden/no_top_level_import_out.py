"""Equinox is optional here, so it is imported inside a try block."""

import arrayfield as af

try:
    import equinox as eqx
except ImportError:  # pragma: no cover
    eqx = None


class Counter(af.ArrayModule):
    count: "jax.Array"
