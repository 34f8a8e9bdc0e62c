"""Annotation -> ArraySpec: which annotations denote arrays, and what they allow."""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Optional, Union

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt
import pytest
from jaxtyping import Array, ArrayLike, Bool, Float, Float32, Int, Int8, Key, Shaped

from arrayfield._spec import (
    Unresolved,
    field_spec,
    init_annotation,
    resolve_annotation,
)

JAX_ARRAY_ANNOTATIONS = [
    jax.Array,
    jnp.ndarray,
    jnp.array,
    jax.typing.ArrayLike,
    Float[Array, "n"],
    Shaped[ArrayLike, "..."],
    Float32[Array, ""],
    Optional[Float[Array, ""]],
    Float[Array, ""] | None,
    Union[Int[Array, ""], None],
    Annotated[Float[Array, "n"], "doc"],
]
NUMPY_ARRAY_ANNOTATIONS = [np.ndarray, np.array, Int[np.ndarray, ""], npt.NDArray]
NOT_ARRAYS = [bool, int, float, str, complex, Any, typing.Callable, eqx.Module, list]


def annotation_id(annotation: Any) -> str:
    """A test id that is the same in every process (pytest-xdist's workers must
    agree): a function by its name, not by a repr that holds its address."""
    if isinstance(annotation, types.FunctionType):
        return f"{annotation.__module__}.{annotation.__qualname__}"
    return repr(annotation)


@pytest.mark.parametrize("annotation", JAX_ARRAY_ANNOTATIONS, ids=annotation_id)
def test_jax_annotations_give_jax_specs(annotation):
    spec = field_spec(annotation)
    assert spec is not None and spec.kind == "jax"


@pytest.mark.parametrize("annotation", NUMPY_ARRAY_ANNOTATIONS, ids=annotation_id)
def test_numpy_annotations_give_numpy_specs(annotation):
    spec = field_spec(annotation)
    assert spec is not None and spec.kind == "numpy"


@pytest.mark.parametrize("annotation", NOT_ARRAYS, ids=annotation_id)
def test_non_array_annotations_are_not_fields_to_convert(annotation):
    assert field_spec(annotation) is None


def test_dtype_categories_are_read_from_jaxtyping():
    assert field_spec(Float32[Array, ""]).dtypes == {"float32"}
    assert field_spec(Int8[Array, ""]).dtypes == {"int8"}
    assert "float32" in field_spec(Float[Array, ""]).dtypes
    assert field_spec(Bool[Array, ""]).dtypes >= {"bool"}
    assert field_spec(Shaped[Array, ""]).dtypes is None
    assert field_spec(jax.Array).dtypes is None


def test_optional_allows_none_and_union_collects_passthrough_types():
    assert field_spec(Optional[Float[Array, ""]]).allow_none
    assert not field_spec(Float[Array, ""]).allow_none
    spec = field_spec(Float[Array, ""] | eqx.Module | float)
    # A named Python number type admits its values as they are, ints too (PEP 484).
    assert spec.passthrough == (eqx.Module, float, int)


def test_numpy_typing_dtype_argument_is_honoured():
    assert field_spec(npt.NDArray[np.float32]).dtypes == {"float32"}


def test_key_annotation_is_a_key_spec():
    spec = field_spec(Key[Array, ""])
    assert spec.is_key and spec.dtypes is None


def test_union_of_jax_and_numpy_prefers_jax():
    assert field_spec(Float[ArrayLike, "n"]).kind == "jax"
    assert field_spec(Union[np.ndarray, jax.Array]).kind == "jax"


def test_specs_are_cached_per_annotation():
    annotation = Float[Array, "q"]
    assert field_spec(annotation) is field_spec(annotation)


class _Owner:
    pass


def test_string_annotations_resolve_in_the_owner_module():
    resolved = resolve_annotation('Float[Array, "n"]', _Owner)
    assert resolved.dim_str == "n" and resolved.dtypes == Float[Array, ""].dtypes
    with pytest.raises(Unresolved, match="NameError"):
        resolve_annotation("NotDefinedAnywhere", _Owner)


def test_forward_refs_inside_optional_resolve():
    resolved = resolve_annotation(Optional["Float[Array, '']"], _Owner)
    assert field_spec(resolved).allow_none


def test_init_annotation_widens_arrays_but_keeps_dims():
    widened = init_annotation(Float[Array, "n"])
    members = typing.get_args(widened)
    assert list in members and tuple in members
    assert float not in members  # shape (n,) never admits a bare scalar
    shaped = [m for m in members if getattr(m, "dim_str", None) == "n"]
    assert {m.array_type for m in shaped} == {jax.Array, np.ndarray}
    assert all(field_spec(m).dtypes is None for m in shaped)  # any dtype: Shaped


def test_init_annotation_admits_scalars_for_scalar_shapes():
    for dims in ["", "...", "*batch"]:
        assert float in typing.get_args(init_annotation(Float[Array, dims]))


def test_init_annotation_keeps_other_union_members():
    members = typing.get_args(init_annotation(Optional[Float[Array, "n"]]))
    assert type(None) in members
