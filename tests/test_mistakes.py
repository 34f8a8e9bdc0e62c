"""Mistakes a newcomer makes, one row each: the error comes at once, from arrayfield,
as the exception type it documents (never a wrapper), and its message names the
class, the field, the wrong value and the fix."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest
from jaxtyping import Array, Float, Int

import arrayfield as af


def dtype_on_str_field_of_array_module() -> Any:
    class Star(af.ArrayModule):
        name: str = af.field(dtype="float32")


def dtype_on_str_field_of_plain_module() -> Any:
    class Star(eqx.Module):
        name: str = af.field(dtype="float32")


def misspelled_dtype() -> Any:
    class Star(af.ArrayModule):
        flux: Float[Array, ""] = af.field(dtype="floot32")


def dtype_on_a_static_field() -> Any:
    class Star(af.ArrayModule):
        flux: Float[Array, ""] = af.field(dtype="float32", static=True)


def default_passed_to_af_field_positionally() -> Any:
    class Star(af.ArrayModule):
        flux: Float[Array, ""] = af.field(1.0)  # pyright: ignore[reportArgumentType]


def list_default_in_af_field() -> Any:
    class Star(eqx.Module):
        flux: Float[Array, "n"] = af.field(default=[1.0, 2.0])


def bare_af_field_annotation() -> Any:
    class Star(af.ArrayModule):
        flux: af.Field = 1.0  # pyright: ignore[reportAssignmentType]


def misspelled_af_field_keyword() -> Any:
    class Star(af.ArrayModule):
        flux: Float[Array, ""] = af.field(defualt=1.0)


def misspelled_class_keyword() -> Any:
    class Star(af.ArrayModule, chek=True):  # pyright: ignore[reportCallIssue]
        flux: Float[Array, ""]


def none_in_non_optional_field_with_check() -> Any:
    class Star(af.ArrayModule, check=True):
        flux: Float[Array, ""]

    return Star(flux=None)  # pyright: ignore[reportArgumentType]


def string_into_float_field() -> Any:
    class Star(af.ArrayModule):
        flux: Float[Array, ""]

    return Star(flux="1.0")  # pyright: ignore[reportArgumentType]


def float_into_int_field() -> Any:
    class Counter(af.ArrayModule):
        count: Int[Array, ""]

    return Counter(count=1.5)  # pyright: ignore[reportArgumentType]


def explain_retraces_of_a_number() -> Any:
    return af.explain_retraces(42)  # pyright: ignore[reportCallIssue, reportArgumentType]


def explain_retraces_on_a_class() -> Any:
    @af.explain_retraces
    class Scene(eqx.Module):
        x: Float[Array, ""]


MISTAKES = [
    pytest.param(
        dtype_on_str_field_of_array_module,
        af.ConversionError,
        ["Star.name", "dtype='float32'", "annotation str", "Annotate the field"],
        id="af.field(dtype=...) on a str field of an ArrayModule",
    ),
    pytest.param(
        dtype_on_str_field_of_plain_module,
        af.ConversionError,
        ["Star.name", "dtype='float32'", "annotation str", "Annotate the field"],
        id="af.field(dtype=...) on a str field of a plain eqx.Module",
    ),
    pytest.param(
        misspelled_dtype,
        af.ConversionError,
        ["dtype='floot32'", "Did you mean 'float32'?", "jnp.float32"],
        id="af.field(dtype='floot32')",
    ),
    pytest.param(
        dtype_on_a_static_field,
        TypeError,
        [
            "Star.flux: af.field(dtype='float32', static=True)",
            "cannot be combined with convert=False or static=True",
            "Drop static=True",
        ],
        id="af.field(dtype=..., static=True)",
    ),
    pytest.param(
        default_passed_to_af_field_positionally,
        TypeError,
        ["Star.flux: af.field(1.0)", "keyword arguments only", "af.field(default=1.0)"],
        id="af.field(1.0)",
    ),
    pytest.param(
        list_default_in_af_field,
        ValueError,
        [
            "Star.flux: af.field(default=[1.0, 2.0])",
            "shared by every instance",
            "default=(1.0, 2.0)",
            "default_factory=lambda: [1.0, 2.0]",
        ],
        id="af.field(default=[1.0, 2.0])",
    ),
    pytest.param(
        bare_af_field_annotation,
        af.ConversionError,
        [
            "Star.flux",
            "annotated af.Field with nothing inside",
            "its default 1.0 would stay as it is",
            "af.Field[Float",
        ],
        id="a bare af.Field annotation",
    ),
    pytest.param(
        misspelled_af_field_keyword,
        TypeError,
        ["af.field()", "'defualt'", "Did you mean 'default'?"],
        id="af.field(defualt=...)",
    ),
    pytest.param(
        misspelled_class_keyword,
        TypeError,
        ["Star:", "chek=True", "Did you mean 'check'?"],
        id="class Star(af.ArrayModule, chek=True)",
    ),
    pytest.param(
        none_in_non_optional_field_with_check,
        af.ValidationError,
        ["Star.flux", "Float[Array, '']", "got None", "Float[Array, ''] | None"],
        id="check=True and None in a field that is not Optional",
    ),
    pytest.param(
        string_into_float_field,
        af.ConversionError,
        ["Star.flux", "'1.0' (str)", "Float[Array, '']", "af.field(convert=False)"],
        id="a string into a Float field",
    ),
    pytest.param(
        float_into_int_field,
        af.ConversionError,
        ["Counter.count", "1.5 (float)", "Int[Array, '']", "would change its value"],
        id="1.5 into an Int field",
    ),
    pytest.param(
        explain_retraces_of_a_number,
        TypeError,
        ["af.explain_retraces()", "not 42", "with af.explain_retraces():"],
        id="af.explain_retraces(42)",
    ),
    pytest.param(
        explain_retraces_on_a_class,
        TypeError,
        ["af.explain_retraces()", "the class Scene", "Decorate a function"],
        id="@af.explain_retraces on a class",
    ),
]


@pytest.mark.parametrize(("mistake", "error_type", "message_parts"), MISTAKES)
def test_mistake_fails_at_once_with_a_message_that_names_the_fix(
    mistake: Callable[[], Any], error_type: type[Exception], message_parts: list[str]
):
    with pytest.raises(error_type) as info:
        mistake()

    assert type(info.value) is error_type  # itself, not wrapped in a RuntimeError
    message = str(info.value)
    missing = [part for part in message_parts if part not in message]
    assert not missing, f"{missing} not in: {message}"


class Scaled(eqx.Module):
    """A layer with its own `__init__`, as equinox's layers have."""

    scale: Float[Array, ""]
    width: int

    def __init__(self, width: int, *, key: jax.Array):
        self.width = width
        self.scale = float(jax.random.uniform(key))  # a Python float


def test_array_module_listed_before_a_layer_keeps_the_layers_init():
    class Sub(af.ArrayModule, Scaled):
        pass

    layer = Sub(3, key=jax.random.key(0))

    assert layer.width == 3
    assert layer.scale.dtype == jnp.float32 and not layer.scale.weak_type


def test_both_base_orders_build_the_same_equinox_layer():
    class ArrayModuleFirst(af.ArrayModule, eqx.nn.Linear):
        pass

    class LinearFirst(eqx.nn.Linear, af.ArrayModule):
        pass

    first = ArrayModuleFirst(2, 3, key=jax.random.key(0))
    second = LinearFirst(2, 3, key=jax.random.key(0))

    assert first.weight.shape == second.weight.shape == (3, 2)
    assert bool((first.weight == second.weight).all())
    assert first.in_features == 2 and first.out_features == 3


def test_subclass_of_array_module_first_layer_inherits_the_layers_init():
    class Sub(af.ArrayModule, eqx.nn.Linear):
        pass

    class SubSub(Sub):
        pass

    assert SubSub(2, 3, key=jax.random.key(0)).weight.shape == (3, 2)


def test_array_module_first_with_a_dataclass_parent_keeps_the_dataclass_init():
    class Parent(eqx.Module):
        flux: Float[Array, ""]

    class Child(af.ArrayModule, Parent):
        pass

    assert Child(flux=1).flux.dtype == jnp.float32


def test_explain_retraces_with_parentheses_decorates_like_without():
    @af.explain_retraces()
    @eqx.filter_jit
    def scale(x, factor):
        return x * factor

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scale(jnp.ones(3), 2.0)
        scale(jnp.ones(3), 3.0)

    assert [w.category for w in caught] == [af.RetraceWarning]
    assert "factor: 2.0 -> 3.0" in str(caught[0].message)
