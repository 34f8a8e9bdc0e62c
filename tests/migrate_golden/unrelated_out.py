import dataclasses

import equinox as eqx
import jax.numpy as jnp


class Plain:
    value: float = 1.0


@dataclasses.dataclass
class Config:
    steps: int = 10


class Layer(eqx.nn.Linear):
    pass


def build() -> eqx.nn.MLP:
    return eqx.nn.MLP(2, 2, 8, 2, key=jnp.zeros(2, dtype=jnp.uint32))
