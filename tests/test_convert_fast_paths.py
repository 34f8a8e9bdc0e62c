"""The hot paths of `_convert.py` give exactly what the general paths give."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Bool, Float, Int, Shaped

from _jax_compat import enable_x64
from arrayfield._convert import to_array
from arrayfield._spec import field_spec


def convert(annotation, value):
    return to_array(value, field_spec(annotation))


@pytest.mark.parametrize("value", [1.5, np.float32(1.5), np.asarray(1.5)])
def test_scalar_becomes_strong_uncommitted_float32(value):
    out = convert(Float[Array, ""], value)
    assert type(out) is type(jnp.zeros(()))
    assert out.dtype == jnp.float32 and not out.weak_type and not out.committed
    assert float(out) == 1.5


def test_scalar_conversion_works_with_jit_disabled():
    with jax.disable_jit():
        out = convert(Int[Array, ""], 3)
    assert isinstance(out, jax.Array) and out.dtype == jnp.int32
    assert not out.weak_type


def test_scalar_conversion_under_jit_gives_a_tracer():
    seen = []

    @jax.jit
    def build(x):
        out = convert(Float[Array, ""], 2.0)
        seen.append(isinstance(out, jax.core.Tracer))
        return x + out

    assert float(build(1.0)) == 3.0
    assert seen == [True]


def test_x64_toggle_is_seen_by_the_scalar_path():
    assert convert(Float[Array, ""], 1.0).dtype == jnp.float32
    with enable_x64(True):
        assert convert(Float[Array, ""], 1.0).dtype == jnp.float64
        assert convert(Shaped[Array, ""], 1).dtype == jnp.int64
    assert convert(Float[Array, ""], 1.0).dtype == jnp.float32


def test_array_of_allowed_dtype_is_returned_as_the_same_object():
    x = jnp.asarray(np.float32(1.0))
    assert convert(Float[Array, ""], x) is x
    assert convert(Shaped[Array, ""], x) is x


def test_array_of_disallowed_dtype_still_converts_after_the_fast_path_warms():
    x = jnp.asarray(np.float32(1.0))
    convert(Float[Array, ""], x)  # the array type is now known to the fast path
    out = convert(Int[Array, ""], x)
    assert out.dtype == jnp.int32 and int(out) == 1


def test_weak_array_of_an_allowed_dtype_is_kept_on_the_fast_path():
    weak = jnp.asarray(1.0)
    assert weak.weak_type
    assert convert(Float[Array, ""], weak) is weak


def test_bool_array_is_kept():
    x = jnp.asarray(np.bool_(True))
    assert convert(Bool[Array, ""], x) is x
