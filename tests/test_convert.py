"""(value, ArraySpec) -> array: the conversion rules of the README table."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import (
    Array,
    Bool,
    Complex,
    Float,
    Float16,
    Float32,
    Inexact,
    Int,
    Int8,
    Key,
    Num,
    Real,
    Shaped,
    UInt,
    UInt8,
)

import arrayfield as af
from _jax_compat import enable_x64
from arrayfield._convert import Rejected, to_array
from arrayfield._spec import field_spec


def convert(annotation, value):
    return to_array(value, field_spec(annotation))


def assert_strong(array, dtype):
    assert isinstance(array, jax.Array)
    assert array.dtype == jnp.dtype(dtype), array.dtype
    assert not array.weak_type


@pytest.mark.parametrize(
    "annotation, value, dtype",
    [
        (Float[Array, ""], 1, "float32"),
        (Float[Array, ""], 1.5, "float32"),
        (Float[Array, ""], True, "float32"),
        (Int[Array, ""], 3, "int32"),
        (Int[Array, ""], 2.0, "int32"),
        (UInt[Array, ""], 3, "uint32"),
        (Bool[Array, ""], True, "bool"),
        (Bool[Array, ""], 1, "bool"),
        (Complex[Array, ""], 1.5, "complex64"),
        (Float32[Array, ""], 1, "float32"),
        (Float16[Array, ""], 0.5, "float16"),
        (Int8[Array, ""], -3, "int8"),
        (UInt8[Array, ""], 255, "uint8"),
        (Shaped[Array, ""], 1, "int32"),
        (Shaped[Array, ""], 1.0, "float32"),
        (Shaped[Array, ""], True, "bool"),
        (Shaped[Array, ""], 1j, "complex64"),
        (Num[Array, ""], True, "int32"),
        (Real[Array, ""], 2, "int32"),
        (Inexact[Array, ""], 2, "float32"),
        (jax.Array, 2, "int32"),
        (jax.Array, 2.5, "float32"),
    ],
)
def test_python_scalar_becomes_strong_array_of_annotated_dtype(
    annotation, value, dtype
):
    result = convert(annotation, value)
    assert_strong(result, dtype)
    assert result.item() == value


def test_int_into_float_field_becomes_strong_float32():
    assert_strong(convert(Float[Array, ""], 0), "float32")


def test_numpy_scalars_keep_their_dtype_when_the_annotation_allows_it():
    assert_strong(convert(Float[Array, ""], np.float16(1.0)), "float16")
    assert_strong(convert(Float[Array, ""], np.int8(3)), "float32")
    assert_strong(convert(Int[Array, ""], np.int8(3)), "int8")


def test_numpy_float64_is_narrowed_to_float32_without_x64():
    result = convert(Float[Array, "n"], np.array([0.1, 0.2]))
    assert_strong(result, "float32")
    np.testing.assert_allclose(result, [0.1, 0.2], rtol=1e-7)


def test_nested_lists_become_arrays():
    result = convert(Float[Array, "2 2"], [[1, 2], (3, 4)])
    assert_strong(result, "float32")
    assert result.shape == (2, 2)
    assert result.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_numpy_annotation_gives_numpy_array_with_numpys_own_dtype():
    result = convert(np.ndarray, 0)
    assert type(result) is np.ndarray and result.dtype == np.int64
    result = convert(Float[np.ndarray, ""], 1)
    assert type(result) is np.ndarray and result.dtype == np.float64
    result = convert(np.ndarray, [1.5, 2.5])
    assert type(result) is np.ndarray and result.dtype == np.float64


def test_numpy_array_of_the_right_dtype_is_stored_as_is():
    array = np.zeros(3, np.float32)
    assert convert(Float[np.ndarray, "3"], array) is array


def test_jax_array_of_right_dtype_is_the_same_object():
    array = jnp.zeros(3)
    assert convert(Float[Array, "3"], array) is array


def test_weak_jax_array_of_an_allowed_dtype_stays_weak():
    weak = jnp.asarray(1.0)
    assert weak.weak_type
    assert convert(Float[Array, ""], weak) is weak
    # Converting to another dtype gives a strong array, as jitted construction does.
    assert_strong(convert(Float[Array, ""], jnp.asarray(1)), "float32")


def test_jax_array_of_another_kind_is_converted_exactly():
    assert_strong(convert(Float[Array, "2"], jnp.array([1, 2])), "float32")
    with pytest.raises(Rejected, match="change"):
        convert(Int[Array, "2"], jnp.array([1.5, 2.0]))


def test_jax_array_in_numpy_field_stays_on_device():
    array = jnp.zeros(2)
    assert convert(np.ndarray, array) is array


def test_x64_is_honoured_at_conversion_time():
    spec = field_spec(Float[Array, ""])
    with enable_x64(True):
        assert_strong(to_array(1.0, spec), "float64")
        assert_strong(to_array(1, field_spec(Int[Array, ""])), "int64")
    assert_strong(to_array(1.0, spec), "float32")


def test_converted_arrays_are_uncommitted():
    assert not convert(Float[Array, ""], 1.0).committed


@pytest.mark.parametrize(
    "annotation, value, match",
    [
        (Int[Array, ""], 1.5, "change its value to 1"),
        (Int[Array, ""], 2**40, "does not fit in int32"),
        (Int8[Array, ""], 200, "does not fit in int8"),
        (UInt[Array, ""], -1, "does not fit in uint32"),
        (Float[Array, ""], 1 + 2j, "imaginary part"),
        (Bool[Array, ""], 2, "change its value to True"),
        (Int[Array, ""], float("nan"), "int32 cannot represent it"),
        (Float32[Array, ""], 1e300, "overflows float32"),
        (Float[Array, ""], 2**24 + 1, "change its value"),
        (Float[Array, ""], 1e-50, r"underflows float32 \(the result would be 0.0"),
        (Float16[Array, ""], -1e-10, "underflows float16"),
        (Complex[Array, ""], 1 + 1e-50j, "underflows complex64"),
        (Float[Array, "n"], np.array([1.0, 1e-50]), r"element \[1\], 1e-50, under"),
        (Float[Array, "n"], [[1.0], [-1e-50]], r"element \[1, 0\], -1e-50, under"),
        (Complex[Array, ""], np.complex128(1e-50j), "underflows complex64"),
        (Float[Array, "n"], np.array([1 + 1j]), r"element \[0\] has an imaginary part"),
        (Int[Array, "n"], np.array([1.0, 2.5]), r"element \[1\] from 2.5 to 2"),
        (Float[Array, ""], "1.0", "'str' is not an array type"),
        (Float[Array, ""], object(), "'object' is not an array type"),
        (Float[Array, "n"], [[1, 2], [3]], "not a rectangular array"),
        (Float[Array, "n"], ["a", "b"], "not numeric"),
        (Key[Array, ""], 0, "jax.random.key"),
    ],
)
def test_value_that_would_change_or_cannot_convert_is_rejected(
    annotation, value, match
):
    with pytest.raises(Rejected, match=match):
        convert(annotation, value)


def test_float_precision_narrowing_is_not_an_error():
    assert convert(Float[Array, ""], 0.1).item() == pytest.approx(0.1)


def test_a_float_that_rounds_to_a_subnormal_or_is_zero_is_not_an_error():
    # A subnormal keeps the value, with fewer digits; only reaching 0.0 loses it.
    assert convert(Float[Array, ""], 1e-40).item() == pytest.approx(1e-40, rel=1e-3)
    assert convert(Float[Array, "n"], np.array([0.0, -0.0, np.nan])).shape == (3,)
    assert convert(Float[Array, ""], -0.0).item() == 0.0


@pytest.mark.parametrize("value", [None, jax.ShapeDtypeStruct((2,), jnp.float32)])
def test_none_and_shape_dtype_structs_are_left_alone(value):
    assert convert(Float[Array, "2"] | None, value) is value


def test_tracers_of_an_allowed_dtype_are_left_alone():
    seen = []

    @jax.jit
    def f(x):
        out = convert(Float[Array, ""], x)
        seen.append(out is x)
        return out

    f(jnp.float32(1))
    f(1.0)  # a weak tracer, kept weak
    assert seen == [True, True]


def test_tracers_widen_to_the_dtype_eager_construction_gives():
    dtypes = []

    @jax.jit
    def f(x):
        out = convert(Float[Array, ""], x)
        dtypes.append((out.dtype, out.weak_type))
        return out

    eager = convert(Float[Array, ""], jnp.int32(1))
    f(jnp.int32(1))
    assert dtypes == [(eager.dtype, eager.weak_type)] == [(jnp.float32, False)]


def test_tracers_are_not_narrowed_to_a_lower_kind_without_values_to_check():
    @jax.jit
    def f(x):
        out = convert(Int[Array, ""], x)
        assert out is x  # float -> int could change values it cannot see
        return out

    f(jnp.float32(2.0))


def test_list_of_tracers_is_stacked():
    @jax.jit
    def f(x):
        return convert(Float[Array, "2"], [x, x])

    assert_strong(f(jnp.float32(2.0)), "float32")


def test_union_admits_other_pytrees_unchanged():
    marker = {"not": "an array"}
    assert convert(Float[Array, ""] | dict, marker) is marker


def test_key_field_keeps_key_arrays():
    key = jax.random.key(0)
    assert convert(Key[Array, ""], key) is key


README_DTYPE_TABLE = {
    # annotation: dtypes for 1, 1.5, True, np.float16(1) (None: an error)
    Float[Array, ""]: ("float32", "float32", "float32", "float16"),
    Int[Array, ""]: ("int32", None, "int32", "int32"),
    UInt[Array, ""]: ("uint32", None, "uint32", "uint32"),
    Bool[Array, ""]: ("bool", None, "bool", "bool"),
    Complex[Array, ""]: ("complex64", "complex64", "complex64", "complex64"),
    Int8[Array, ""]: ("int8", None, "int8", "int8"),
    Shaped[Array, ""]: ("int32", "float32", "bool", "float16"),
    jax.Array: ("int32", "float32", "bool", "float16"),
    Num[Array, ""]: ("int32", "float32", "int32", "float16"),
    Real[Array, ""]: ("int32", "float32", "int32", "float16"),
    Inexact[Array, ""]: ("float32", "float32", "float32", "float16"),
}


@pytest.mark.parametrize("annotation", list(README_DTYPE_TABLE), ids=repr)
def test_readme_dtype_table(annotation):
    values = (1, 1.5, True, np.float16(1))
    for value, expected in zip(values, README_DTYPE_TABLE[annotation], strict=True):
        if expected is None:
            with pytest.raises(Rejected):
                convert(annotation, value)
        else:
            assert_strong(convert(annotation, value), expected)


def test_conversion_errors_show_a_small_arrays_values_and_a_large_ones_shape():
    class Counter(af.ArrayModule):
        count: Int[Array, "..."]

    with pytest.raises(af.ConversionError, match=r"f32\[\] 1\.5 \(JAX array\)"):
        Counter(count=jnp.float32(1.5))
    with pytest.raises(af.ConversionError, match=r"f64\[2\] \[1\.5, 2\.5\] \(NumPy"):
        Counter(count=np.array([1.5, 2.5]))
    with pytest.raises(af.ConversionError, match=r"f32\[100\] \(JAX array\) in"):
        Counter(count=jnp.full(100, 0.5))
