"""Equinox is optional here, so it is imported inside a try block."""

try:
    import equinox as eqx
except ImportError:  # pragma: no cover
    eqx = None


class Counter(eqx.Module):
    count: "jax.Array"
