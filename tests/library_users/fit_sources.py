"""A tutorial-style script using skylib: one fit step per flux guess.

`python fit_sources.py [jit] [fixed]`: jit is eqx, af or af-numbers; `fixed`
follows the advice arrayfield prints (an array given to the package's setter).
It prints one JSON line: the XLA compiles of the step and the warnings' text."""

import json
import sys
import warnings

import equinox as eqx
import jax.numpy as jnp
from skylib import Source, render

import arrayfield as af

JITS = {
    "eqx": eqx.filter_jit,
    "af": af.filter_jit,
    "af-numbers": lambda f: af.filter_jit(f, share_numbers=True),
}
jit, fixed = sys.argv[1], "fixed" in sys.argv[2:]
step = JITS[jit](render)
image = jnp.linspace(0.0, 1.0, 8)
source = Source(1.0, [2.0, 0.0])


def with_guess(source, guess):
    # `fixed`: as the advice says, an array given where the value is set.
    return source.with_flux(jnp.asarray(guess, dtype=jnp.float32) if fixed else guess)


warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught, af.count_compiles() as count:
    for i in range(12):
        source = with_guess(source, 1.0 + 0.25 * i)
        step(source, image)
# What af.audit says of two sources as the loop makes them.
findings = af.audit(with_guess(source, 1.0), with_guess(source, 2.0), name="source")
print(
    json.dumps(
        {
            "compiles": sum(count.compiled.values()),
            "warnings": [
                str(w.message) for w in caught if "arrayfield" in repr(w.category)
            ],
            "audit": [f.hint for f in findings],
        }
    )
)
