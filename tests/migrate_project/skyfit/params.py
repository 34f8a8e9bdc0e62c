"""Fitted parameters: a container class made from the names being fitted."""

import equinox as eqx
import jax


def make_parameters(values):
    annotations = {name: jax.Array for name in values}
    cls = type("Parameters", (eqx.Module,), {"__annotations__": annotations})
    return cls(**values)
