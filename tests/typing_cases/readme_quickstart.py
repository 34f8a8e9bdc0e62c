import dataclasses

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

import arrayfield as af


class Source(af.ArrayModule):
    flux: af.Field[Float[Array, ""]]  # af.Field: type checkers accept numbers too
    position: af.Field[Float[Array, "2"]]
    steps: af.Field[Int[Array, ""]] = af.field(default=0)
    name: str = "star"  # not an array annotation: left alone


@eqx.filter_jit
def step(source: Source) -> Source:
    return dataclasses.replace(source, steps=source.steps + 1)


source = Source(flux=1, position=[0.5, 1.5])
for _ in range(100):
    source = step(source)  # traces once
assert source.flux.dtype == jnp.float32 and not source.flux.weak_type
assert int(source.steps) == 100
