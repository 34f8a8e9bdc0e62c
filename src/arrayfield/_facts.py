"""Facts about JAX and equinox that the fields and every layer above them use,
read through public API only.

Defining, constructing, converting and validating ArrayModules needs nothing
else from JAX or equinox: a JAX or equinox release that moves a private name
can break `af.filter_jit` or the diagnostics (each falls back loudly) but never
the fields. `tests/test_hidden_names.py` holds us to it.

This module imports no other arrayfield module.
"""

from __future__ import annotations

from typing import Any

import equinox
import jax

# The Python numbers JAX treats as scalars (`jax.jit` traces them as weakly typed
# 0-d arrays; `eqx.filter_jit` hashes them). Exact types: subclasses such as
# IntEnum are decided case by case where it matters.
PYTHON_NUMBERS: tuple[type, ...] = (bool, int, float, complex)

# Equinox's own Module class, captured at import: a program may rebind
# `equinox.Module` (to `af.ArrayModule`, as the compatibility plugins do), and
# "is this an equinox Module" must not change with it.
EQX_MODULE: type = equinox.Module


def is_module(node: Any) -> bool:
    """Whether `node` is an equinox Module (of any subclass, ArrayModules included)."""
    return isinstance(node, EQX_MODULE)


# The class of concrete JAX arrays, for the fields' fast path: `type(x) is
# array_class` in place of `isinstance(x, jax.Array)`, whose metaclass check
# costs ~0.1 us per leaf. JAX names that class only in private modules, and
# making an array here would start a backend at import (before a program's
# `jax.distributed.initialize()`, say), so it is learned from the first concrete
# array the fields convert (`learn_array_class`). Until then `jax.Array`, which
# `type(x) is` never matches: every array takes the isinstance path, as correct.
array_class: type = jax.Array


def learn_array_class(array: Any) -> None:
    """Take `type(array)`, a concrete JAX array of numbers (not a tracer, not a
    key array), as the class the fast path tests for."""
    global array_class
    array_class = type(array)
