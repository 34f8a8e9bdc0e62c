"""The annotation is the contract: what it admits as a Python value stays one, what
it declares an array becomes one. Each case here was a divergence from `eqx.Module`
found by running other projects' code with the base class swapped."""

import collections
import typing
import warnings
from typing import NamedTuple, Optional, Union

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import jaxtyping
import numpy as np
import pytest
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float, Int, PyTree, Real, Shaped

import arrayfield as af
from _jax_compat import enable_x64
from helpers import python, run_code

# The "scalar-like" alias equinox-based solver libraries annotate with.
ScalarLike = Union[int, float, Real[Array, ""], Real[np.ndarray, ""], np.number]
BoolLike = Union[bool, Bool[Array, ""]]


# -- unions that name a Python number type -------------------------------------------


class Hyper(af.ArrayModule):
    increment: int | jax.Array
    rate: ScalarLike
    skip: BoolLike
    loose: ArrayLike
    loose_float: Float[ArrayLike, ""]


def make_hyper(**overrides):
    values = dict(increment=1, rate=0.1, skip=False, loose=2.5, loose_float=3)
    return Hyper(**{**values, **overrides})


def test_python_numbers_in_a_union_that_names_their_type_are_kept():
    h = make_hyper()
    assert type(h.increment) is int and h.increment == 1
    assert type(h.rate) is float  # ScalarLike names float
    assert h.skip is False  # `type(x) is bool` checks at trace time still work
    assert type(h.loose) is float  # ArrayLike names every Python number type
    assert type(h.loose_float) is int  # float admits int (PEP 484's numeric tower)


def test_numpy_scalars_in_a_union_that_names_np_number_are_kept():
    value = np.float32(0.5)
    assert make_hyper(rate=value).rate is value


def test_kept_python_float_does_not_upcast_a_float32_iterate_under_x64():
    with enable_x64(True):
        h = make_hyper(rate=0.1)
        iterate = jnp.ones(3, jnp.float32)
        out = jax.lax.while_loop(
            lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * h.rate), (0, iterate)
        )
        assert out[1].dtype == jnp.float32


def test_int_or_array_field_is_broadcast_not_mapped_by_filter_vmap():
    h = make_hyper(increment=1)
    out = eqx.filter_vmap(lambda m, x: x + m.increment, in_axes=(None, 0))(
        h, jnp.arange(3)
    )
    assert out.tolist() == [1, 2, 3]
    # what eqx.filter_vmap's default in_axes does with a module argument
    out = eqx.filter_vmap(lambda m, x: x + m.increment)(h, jnp.arange(3))
    assert out.tolist() == [1, 2, 3]


def test_arrays_in_a_union_that_names_numbers_follow_the_array_member():
    h = make_hyper(rate=[0.5])  # a list is not a number: the array member converts
    assert isinstance(h.rate, jax.Array) and h.rate.dtype == jnp.float32


# -- JAX arrays: the same object, weak stays weak, eager equals jitted ---------------


class Weights(af.ArrayModule):
    w: Float[Array, ""]
    n: Int[Array, ""]


def test_weak_array_is_kept_as_the_same_object():
    weak = jnp.asarray(0.7)
    assert weak.weak_type
    stored = Weights(w=weak, n=0).w
    assert stored is weak
    # a float32 operand keeps its dtype, as with eqx.Module
    assert (jnp.ones((), jnp.float32) * stored).dtype == jnp.float32


@pytest.mark.parametrize(
    "make",
    [lambda: jnp.asarray(0.7), lambda: jnp.asarray(2), lambda: jnp.float32(1.0)],
    ids=["weak float", "weak int into Float", "strong float"],
)
def test_eager_and_jitted_construction_store_the_same_dtype_and_weak_type(make):
    def build(x):
        m = Weights(w=x, n=0)
        return m.w

    eager = build(make())
    with jax.disable_jit():
        no_jit = build(make())
    jitted_seen = []

    @jax.jit
    def traced(x):
        w = build(x)
        jitted_seen.append((w.dtype, w.weak_type))
        return w

    traced(make())
    assert (eager.dtype, eager.weak_type) == (no_jit.dtype, no_jit.weak_type)
    assert jitted_seen == [(eager.dtype, eager.weak_type)]


def test_python_scalars_in_pure_array_fields_still_become_strong_arrays():
    m = Weights(w=0.5, n=3)
    assert m.w.dtype == jnp.float32 and not m.w.weak_type
    assert m.n.dtype == jnp.int32 and not m.n.weak_type


# -- NumPy fields keep NumPy semantics ----------------------------------------------


class Table(af.ArrayModule):
    values: Float[np.ndarray, "s"]
    count: np.ndarray


def test_float64_numpy_array_stays_float64_without_x64():
    with enable_x64(False):
        data = np.linspace(0, 1, 3)
        table = Table(values=data, count=0)
    assert table.values is data and table.values.dtype == np.float64
    with enable_x64(True):  # enabled later: the stored array is unchanged
        assert table.values.dtype == np.float64


def test_python_number_into_numpy_field_takes_numpys_dtype():
    table = Table(values=[1, 2], count=3)
    assert table.values.dtype == np.float64
    assert isinstance(table.count, np.ndarray) and table.count.dtype == np.int64


def test_numpy_array_stays_numpy_in_a_union_that_admits_numpy_arrays():
    class Either(af.ArrayModule):
        x: Union[Float[Array, "n"], Float[np.ndarray, "n"]]

    data = np.zeros(2)
    assert Either(x=data).x is data
    assert isinstance(Either(x=[1.0]).x, jax.Array)  # non-arrays: JAX wins


# -- containers whose annotation says every element is an array ---------------------


class Holder(af.ArrayModule):
    items: list[Float[Array, ""]]
    pair: tuple[Float[Array, ""], Int[Array, ""]]
    many: tuple[Float[Array, ""], ...]
    named: dict[str, Float[Array, "n"]]
    tree: PyTree[Float[Array, "..."]]
    maybe: Optional[list[Float[Array, ""]]] = None


def make_holder(**overrides):
    values = dict(
        items=[1.0, 2],
        pair=(1.5, 2),
        many=(1, 2, 3),
        named={"a": [1.0, 2.0]},
        tree={"x": 1.0, "y": [2, 3]},
    )
    return Holder(**{**values, **overrides})


def _strong_f32(x) -> bool:
    return isinstance(x, jax.Array) and x.dtype == jnp.float32 and not x.weak_type


def test_containers_of_arrays_convert_their_elements():
    h = make_holder()
    assert type(h.items) is list and all(_strong_f32(x) for x in h.items)
    assert _strong_f32(h.pair[0]) and h.pair[1].dtype == jnp.int32
    assert type(h.many) is tuple and len(h.many) == 3
    assert h.named["a"].shape == (2,) and _strong_f32(h.named["a"])
    assert _strong_f32(h.tree["x"]) and all(_strong_f32(x) for x in h.tree["y"])
    assert h.maybe is None
    assert make_holder(maybe=[0.5]).maybe[0].dtype == jnp.float32


def test_container_of_right_arrays_is_kept_as_the_same_object():
    items = [jnp.float32(1.0), jnp.float32(2.0)]
    assert make_holder(items=items).items is items


def test_container_loop_traces_once():
    traces = 0

    @eqx.filter_jit
    def step(h):
        nonlocal traces
        traces += 1
        return h

    for i in range(5):
        step(make_holder(items=[float(i), i + 0.5]))
    assert traces == 1


def test_bad_element_names_the_field_and_the_element():
    with pytest.raises(af.ConversionError, match=r"Holder\.items: .*element \[1\]"):
        make_holder(items=[1.0, "two"])
    with pytest.raises(af.ConversionError, match=r"Holder\.pair: .*3 elements"):
        make_holder(pair=(1.0, 2, 3))


def test_audit_is_clean_after_containers_are_converted():
    assert not af.audit(make_holder())


def test_pytree_container_does_not_reach_into_modules():
    class Inner(eqx.Module):
        count: int

    inner = Inner(count=3)
    h = make_holder(tree={"inner": inner, "x": 1.0})
    assert h.tree["inner"] is inner and h.tree["inner"].count == 3


# -- values arrayfield does not own pass through -------------------------------------


class Carry(af.ArrayModule):
    x: Array
    buffer: Array


def test_equinox_loop_buffers_in_array_fields_are_stored_unchanged():
    def body(carry):
        # `buffer` is equinox's buffer wrapper (a Module) inside the loop
        buffer = carry.buffer.at[carry.x].set(carry.x.astype(jnp.float32))
        return Carry(x=carry.x + 1, buffer=buffer)

    init = Carry(x=0, buffer=jnp.zeros(3))
    final = eqxi.while_loop(
        lambda c: c.x < 3, body, init, max_steps=3, kind="checkpointed",
        buffers=lambda c: c.buffer,
    )  # fmt: skip
    assert final.buffer.tolist() == [0.0, 1.0, 2.0]


def test_pytrees_and_modules_in_array_fields_are_stored_unchanged():
    class Quantity(eqx.Module):  # a quax-style array value
        value: Array

    class Pair(NamedTuple):
        a: float
        b: float

    q, p = Quantity(jnp.ones(2)), Pair(1.0, 2.0)
    c = Carry(x=q, buffer=p)
    assert c.x is q and c.buffer is p


@pytest.mark.parametrize(
    "value",
    ["1.0", b"1", [[1, 2], [3]], object()],
    ids=["str", "bytes", "ragged", "obj"],
)
def test_non_array_values_are_still_errors_naming_the_field(value):
    with pytest.raises(af.ConversionError, match=r"Carry\.x: cannot store"):
        Carry(x=value, buffer=jnp.zeros(1))


# -- AnnotationWarning only for numeric data -----------------------------------------


def test_unresolvable_annotation_with_a_tuple_of_functions_does_not_warn():
    class Transform(NamedTuple):  # like optax.GradientTransformation
        init: typing.Callable
        update: typing.Callable

    class Opt(af.ArrayModule):
        tx: "NotImportedHere"

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Opt(tx=Transform(len, print))
        Opt(tx=(len, print))
    with pytest.warns(af.AnnotationWarning):
        Opt(tx=[1.0, 2.0])


def test_filterwarnings_error_suite_collects_with_such_a_class(tmp_path):
    module = tmp_path / "opt_module.py"
    module.write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING, Callable, NamedTuple\n"
        "import arrayfield as af\n"
        "if TYPE_CHECKING:\n"
        "    from optax import GradientTransformation\n"
        "class T(NamedTuple):\n"
        "    init: Callable\n"
        "    update: Callable\n"
        "class Opt(af.ArrayModule):\n"
        "    tx: GradientTransformation\n"
        "OPT = Opt(tx=T(len, print))\n"
    )
    completed = python("-W", "error", "-c", "import opt_module", cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr


# -- what still changes: documented in docs/changes.md -------------------------------


def test_converted_inputs_are_new_objects():
    data = np.zeros(3, np.float32)

    class Image(af.ArrayModule):
        pixels: Float[Array, "n"]

    image = Image(pixels=data)
    assert image.pixels is not data  # a NumPy array became a JAX array
    leaves = jax.tree_util.tree_leaves(image)
    assert not any(leaf is data for leaf in leaves)


def test_converted_scalar_field_is_mapped_by_filter_vmap_unless_told_otherwise():
    class Step(af.ArrayModule):
        size: Float[Array, ""]

    step = Step(size=2.0)  # a 0-d array leaf now, where eqx.Module kept a float
    with pytest.raises(ValueError):
        eqx.filter_vmap(lambda s, x: x * s.size)(step, jnp.arange(3.0))
    out = eqx.filter_vmap(lambda s, x: x * s.size, in_axes=(None, 0))(
        step, jnp.arange(3.0)
    )
    assert out.tolist() == [0.0, 2.0, 4.0]


def test_shaped_annotation_keeps_what_it_is_given():
    class Any_(af.ArrayModule):
        x: Shaped[Array, "..."]

    weak = jnp.asarray(3)
    assert Any_(x=weak).x is weak


def test_retrace_advice_for_a_number_kept_by_a_union_names_the_number_type():
    class Stepper(af.ArrayModule):
        rate: float | Float[Array, ""]

    step = af.explain_retraces(eqx.filter_jit(lambda m: m.rate * 2))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        step(Stepper(rate=0.1))
        step(Stepper(rate=0.2))
    (message,) = [str(w.message) for w in record if w.category is af.RetraceWarning]
    assert "which names a Python number type" in message
    assert "subclass af.ArrayModule" not in message


def test_strong_scalar_field_promotes_half_precision_where_a_python_float_did_not():
    class Scale(af.ArrayModule):
        factor: Float[Array, ""]

    x = jnp.ones(2, jnp.float16)
    assert (x * Scale(factor=0.5).factor).dtype == jnp.float32
    assert (x * 0.5).dtype == jnp.float16


def test_strong_int_field_is_an_error_under_strict_promotion():
    class Offset(af.ArrayModule):
        by: Int[Array, ""]

    with jax.numpy_dtype_promotion("strict"):
        assert (jnp.ones(2) + 1).dtype == jnp.float32  # a Python int is fine
        with pytest.raises(ValueError, match="promot"):  # TypePromotionError
            jnp.ones(2) + Offset(by=1).by


def test_module_level_instance_keeps_the_x64_setting_of_import_time(tmp_path):
    (tmp_path / "built_at_import.py").write_text(
        "from jaxtyping import Array, Float\n"
        "import arrayfield as af\n"
        "class Scale(af.ArrayModule):\n"
        "    factor: Float[Array, '']\n"
        "SCALE = Scale(factor=0.5)\n"
    )
    script = (
        "import jax\n"
        "import built_at_import\n"
        "jax.config.update('jax_enable_x64', True)\n"
        "print(built_at_import.SCALE.factor.dtype)\n"
    )
    completed = run_code(script, cwd=tmp_path, check=True)
    assert completed.stdout.strip() == "float32"


def test_check_true_accepts_converted_containers():
    class Checked(af.ArrayModule, check=True):
        tree: PyTree[Float[Array, "..."]]
        items: list[Float[Array, ""]]

    checked = Checked(tree=jnp.ones(2), items=[1.0])
    assert checked.items[0].dtype == jnp.float32


# -- found in review -----------------------------------------------------------------


def test_a_union_with_a_typevar_or_any_converts_nothing_whatever_ran_before():
    T = typing.TypeVar("T")

    class Either(af.ArrayModule, typing.Generic[T]):
        x: T | Float[Array, ""]

    jnp.ones(()) + Weights(w=np.float32(1), n=0).w  # concrete arrays seen before
    half = jnp.ones((), jnp.float16)
    assert Either(x=half).x is half
    assert type(Either(x=1.5).x) is float


def test_literal_newtype_and_protocol_members_admit_their_own_values_only():
    Flux = typing.NewType("Flux", float)

    class Opaque(typing.Protocol):
        def render(self) -> None: ...

    class Choice(af.ArrayModule):
        mode: typing.Literal["auto"] | Float[Array, ""]
        flux: Flux | Float[Array, "n"]
        how: Opaque | Float[Array, ""]  # not runtime_checkable: admits anything

    c = Choice(mode=1.5, flux=[1.0, 2.0], how=1.5)
    assert isinstance(c.mode, jax.Array)  # not a str: converted
    assert Choice(mode="auto", flux=2.0, how=0).mode == "auto"
    assert isinstance(c.flux, jax.Array) and type(Choice("auto", 2.0, 0).flux) is float
    assert type(c.how) is float


def test_a_tuple_in_a_list_field_is_converted_and_stays_a_tuple():
    h = make_holder(items=(1.0, 2.0), named=collections.OrderedDict(a=[1.0]))
    assert type(h.items) is tuple and all(_strong_f32(x) for x in h.items)
    assert type(h.named) is collections.OrderedDict and _strong_f32(h.named["a"])


@pytest.mark.parametrize("value", ["abc", 1.5], ids=["str", "number"])
def test_a_value_that_is_not_the_annotated_container_is_an_error(value):
    with pytest.raises(af.ConversionError, match=r"Holder\.items: .*list of arrays"):
        make_holder(items=value)


def test_list_of_jax_arrays_stores_the_same_dtype_eagerly_and_under_jit():
    class V(af.ArrayModule):
        v: Float[Array, "n"]

    with enable_x64(True):
        eager = V(v=[jnp.float32(1.0), 2.0]).v
        jitted = jax.jit(lambda x: V(v=[x, 2.0]).v)(jnp.float32(1.0))
    assert eager.dtype == jitted.dtype == jnp.float32


def test_rejected_jax_array_gets_no_advice_to_pass_an_array():
    class Half(af.ArrayModule):
        x: jaxtyping.Float16[Array, ""]

    with pytest.raises(af.ConversionError) as caught:
        Half(x=jnp.float32(1e5))
    assert "overflows float16" in str(caught.value)
    assert "Pass a number, an array" not in str(caught.value)


def test_an_array_a_non_array_member_admits_is_kept_whatever_ran_before():
    class Seq(af.ArrayModule):
        x: collections.abc.Iterable | jaxtyping.Float32[Array, "n"]

    half = jnp.ones(2, jnp.float16)  # not float32, but an Iterable
    first = Seq(x=half).x
    jnp.ones(2) + Weights(w=np.float32(1), n=0).w  # concrete arrays seen meanwhile
    assert first is half and Seq(x=half).x is half


# -- type aliases ---------------------------------------------------------------------


def test_type_alias_fields_convert_and_validate_as_what_they_stand_for():
    typing_extensions = pytest.importorskip("typing_extensions")
    alias = typing_extensions.TypeAliasType
    element = typing_extensions.TypeVar("element")
    scalar = alias("Scalar", Float[Array, ""])
    pair = alias("Pair", tuple[element, element], type_params=(element,))
    maybe = alias("Maybe", Optional[scalar])

    class Aliased(af.ArrayModule, check=True):
        level: scalar
        levels: list[scalar]
        both: pair[scalar]
        optional: maybe = None

    made = Aliased(level=1, levels=[2], both=(3, 4), optional=5)
    for value in (made.level, made.levels[0], *made.both, made.optional):
        assert isinstance(value, jax.Array) and value.dtype == jnp.float32
    with pytest.raises(af.ValidationError, match=r"Aliased\.level: expected Scalar"):
        Aliased(level=[1.0], levels=[], both=(1, 2))
    with pytest.raises(af.ConversionError, match=r"Aliased\.level: cannot store 'a'"):
        Aliased(level="a", levels=[], both=(1, 2))


@pytest.mark.skipif(
    not hasattr(typing, "TypeAliasType"), reason="the `type` statement is 3.12+"
)
def test_a_type_statement_alias_field_is_converted():
    code = (
        "import jax.numpy as jnp\n"
        "from jaxtyping import Array, Float\n"
        "import arrayfield as af\n"
        "type Scalar = Float[Array, '']\n"
        "type Later = Flux | None\n"  # names a class defined below: lazy
        "class Flux(af.ArrayModule):\n"
        "    level: Scalar\n"
        "class Holder(af.ArrayModule):\n"
        "    flux: Later = None\n"
        "    gain: Scalar = 2\n"
        "assert Flux(level=1).level.dtype == jnp.float32\n"
        "assert Holder().gain.dtype == jnp.float32\n"
    )
    result = run_code(code)
    assert result.returncode == 0, result.stderr
