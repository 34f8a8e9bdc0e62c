"""Property-based tests: the README's conversion rules hold for generated classes.

Annotations and values are generated as *recipes* (plain data that hypothesis can
print and shrink) and materialised inside the test body, so JAX arrays are created
under the x64 setting the example runs with. The expected outcome comes from
`expected`, an oracle written from the README's prose rules; it never calls
arrayfield's own dtype helpers.
"""

import dataclasses
import math
import re
import types
import typing
import warnings
from collections.abc import Callable
from fractions import Fraction
from typing import Annotated, Any, Optional, Union

import equinox as eqx
import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from jax.typing import ArrayLike
from jaxtyping import (
    AbstractArray,
    Array,
    Bool,
    Complex,
    Float,
    Float16,
    Float32,
    Inexact,
    Int,
    Int8,
    Integer,
    Num,
    Real,
    Shaped,
    UInt,
    UInt8,
)

import arrayfield as af
from _jax_compat import enable_x64


class Marker(eqx.Module):
    """A non-array type admitted by some generated unions."""


# Names the string annotations below are evaluated against (this module's globals).
_ANNOTATION_NAMES = (Annotated, Optional, Union, ArrayLike, Array, Marker, jnp)
_CATEGORIES = {
    "Bool": Bool,
    "UInt": UInt,
    "Int": Int,
    "Integer": Integer,
    "Float": Float,
    "Complex": Complex,
    "Inexact": Inexact,
    "Real": Real,
    "Num": Num,
    "Shaped": Shaped,
    "Float32": Float32,
    "Float16": Float16,
    "Int8": Int8,
    "UInt8": UInt8,
}
_ARRAY_TYPES = ("Array", "np.ndarray", "ArrayLike")
_BARE_ARRAYS = ("jax.Array", "jnp.ndarray", "np.ndarray", "ArrayLike")
_WRAPPERS = (
    "{}",
    "Optional[{}]",
    "Union[{}, None]",
    "{} | None",
    "Union[{}, int]",
    "Union[{}, Marker]",
    "Annotated[{}, 'meta']",
)
_NUMERIC_DTYPES = tuple(
    np.dtype(name)
    for name in [
        *("bool", "int8", "int16", "int32", "int64"),
        *("uint8", "uint16", "uint32", "uint64"),
        *("float16", "float32", "float64", "complex64", "complex128"),
    ]
)
# The dtypes JAX keeps as they are without x64.
_NARROW_DTYPES = tuple(
    d
    for d in _NUMERIC_DTYPES
    if d.name not in ("int64", "uint64", "float64", "complex128")
)


# -- the oracle: README "Which dtype" and "Errors, never silent changes" -------------


@dataclasses.dataclass(frozen=True)
class Annotation:
    text: str  # the annotation as a user would write it
    as_string: bool  # store the string itself (resolved lazily) or the object
    category: str | None  # jaxtyping category, None for a bare array type
    array_type: str

    def resolve(self) -> Any:
        return eval(self.text, globals())

    def field_annotation(self) -> Any:
        return self.text if self.as_string else self.resolve()

    @property
    def kind(self) -> str:
        return "numpy" if self.array_type == "np.ndarray" else "jax"

    @property
    def allowed(self) -> frozenset[str] | None:
        if self.category in (None, "Shaped"):
            return None
        return frozenset(_CATEGORIES[self.category].dtypes)

    @property
    def admits_marker(self) -> bool:
        return "Marker" in self.text

    def admitted_as_is(self) -> tuple[type, ...]:
        """The union's members that are not array types, with PEP 484's numeric
        tower (a float-annotated member admits ints, a complex one floats and ints).
        """
        found = []
        for member in _flat_members(self.resolve()):
            if member in (jax.Array, np.ndarray) or _is_jaxtyping_array(member):
                continue
            found.append(member)
            found.extend({float: [int], complex: [float, int]}.get(member, []))
        return tuple(found)

    @property
    def admits_numpy(self) -> bool:
        return re.search(r"\bnp\.ndarray|ArrayLike", self.text) is not None


def _flat_members(annotation) -> list:
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _flat_members(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in _flat_members(a)]
    return [] if annotation in (None, type(None)) else [annotation]


def _is_jaxtyping_array(member) -> bool:
    return isinstance(member, type) and issubclass(member, AbstractArray)


_LEVEL = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}


def kind_of(name: str) -> str:
    for prefix, kind in (
        ("bool", "b"),
        ("uint", "u"),
        ("int", "i"),
        ("bfloat", "f"),
        ("float", "f"),
        ("complex", "c"),
    ):
        if name.startswith(prefix):
            return kind
    raise AssertionError(name)


def default_dtype(kind: str, x64: bool) -> str:
    bits = 64 if x64 else 32
    return {
        "b": "bool",
        "i": f"int{bits}",
        "u": f"uint{bits}",
        "f": f"float{bits}",
        "c": f"complex{2 * bits}",
    }[kind]


def canonical(dtype: np.dtype, x64: bool) -> str:
    """What `jnp.asarray` makes of a NumPy dtype: 64-bit becomes 32-bit without x64."""
    if x64 or dtype.itemsize < 8 or dtype.name == "complex64":
        return dtype.name
    return {
        "int64": "int32",
        "uint64": "uint32",
        "float64": "float32",
        "complex128": "complex64",
    }[dtype.name]


def expected_dtype(allowed: frozenset[str] | None, source: np.dtype, x64: bool):
    """README: the value's own (canonical) dtype if allowed, else the default dtype
    of the nearest allowed kind in the order bool -> int -> float -> complex (for
    exact annotations like `Float16`, the one dtype of that kind)."""
    own = canonical(source, x64)
    if allowed is None or own in allowed:
        return np.dtype(own)
    src = kind_of(source.name)
    kinds = {kind_of(name) for name in allowed}

    def nearness(k: str):
        distance = abs(_LEVEL[k] - _LEVEL[src])
        return (distance, k != src, _LEVEL[k] < _LEVEL[src], k == "u")

    kind = min(kinds, key=nearness)
    if default_dtype(kind, x64) in allowed:
        return np.dtype(default_dtype(kind, x64))
    of_kind = [jnp.dtype(n) for n in allowed if kind_of(n) == kind]
    return np.dtype(max(of_kind, key=lambda d: d.itemsize))


def _is_nan(x) -> bool:
    return isinstance(x, (float, complex)) and (
        math.isnan(x.real) or math.isnan(x.imag)
    )


def fits(x: bool | int | float | complex, target: np.dtype) -> bool:
    """Whether the Python number `x` survives being stored as `target`.

    Floats may lose precision into a narrower float (JAX's normal behaviour) but a
    finite float must not become inf, nor a nonzero one 0.0; everything else must
    be exact. NaN stays NaN.
    """
    kind = target.kind
    if isinstance(x, complex) and kind != "c":
        if x.imag != 0:  # a NaN imaginary part is not 0 either
            return False
        x = x.real
    if kind == "b":
        return not _is_nan(x) and x in (0, 1)
    if kind in "iu":
        if _is_nan(x) or (isinstance(x, float) and not math.isfinite(x)):
            return False
        info = np.iinfo(target)
        return x == int(x) and info.min <= x <= info.max
    # float or complex target
    parts = (x.real, x.imag) if isinstance(x, complex) else (x,)
    part_dtype = np.finfo(target).dtype  # complex64 -> float32
    for part in parts:
        if isinstance(part, (bool, int)):
            if abs(part) > 2**1000:
                return False
            with np.errstate(over="ignore"):  # an int beyond the float's range
                stored = np.asarray(float(part)).astype(part_dtype)
            if not np.isfinite(stored) or Fraction(float(stored)) != part:
                return False
        elif math.isfinite(part):
            with np.errstate(over="ignore", under="ignore"):
                stored = np.asarray(part).astype(part_dtype)
            if not np.isfinite(stored) or (part != 0 and stored == 0):
                return False  # overflows to inf, or underflows to 0.0
    return True


# -- value recipes -------------------------------------------------------------------

_INT_EDGES = [0, 1, -1, 2, 127, 128, -129, 255, 256, 2**31 - 1, 2**31, -(2**31)]
_INT_EDGES += [2**32, 2**53 + 1, 2**63 - 1, -(2**63), 2**64, 2**70, -(2**70) - 1]
_FLOAT_EDGES = [0.0, -0.0, 0.5, 1.0, 1.5, 2.0, -3.0, 0.1, 1e-45, 5e-324, 1e300]
_FLOAT_EDGES += [65504.0, 70000.0, 3e38, 3.5e38, 2.0**24 + 1, float("nan")]
_FLOAT_EDGES += [float("inf"), -float("inf")]

python_ints = st.one_of(st.sampled_from(_INT_EDGES), st.integers(-(2**70), 2**70))
python_floats = st.one_of(st.sampled_from(_FLOAT_EDGES), st.floats())
python_scalars = st.one_of(
    st.booleans(),
    python_ints,
    python_floats,
    st.sampled_from([1 + 0j, 1 + 2j, 2j, complex(float("nan"), 0), 1e300 + 0j]),
    st.complex_numbers(),
)
small_shapes = hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3)


def _small_elements(dtype: np.dtype):
    if dtype.kind == "b":
        return st.booleans()
    return st.integers(0 if dtype.kind == "u" else -3, 3)


@st.composite
def numpy_arrays(draw, dtypes=_NUMERIC_DTYPES, shapes=small_shapes):
    dtype = draw(st.sampled_from(dtypes))
    shape = draw(shapes)
    elements = draw(st.sampled_from([None, _small_elements(dtype)]))
    return draw(hnp.arrays(dtype, shape, elements=elements))


@st.composite
def nested_lists(draw):
    element = draw(
        st.sampled_from(
            [
                st.booleans(),
                st.integers(-(2**62), 2**62),
                st.integers(-3, 3),
                python_floats,
                st.one_of(st.integers(-3, 3), st.floats(-4, 4)),
                st.complex_numbers(max_magnitude=10),
            ]
        )
    )
    rows = draw(st.integers(1, 3))
    columns = draw(st.integers(1, 3))
    if draw(st.booleans()):
        return draw(st.lists(element, min_size=rows, max_size=rows))
    row = st.lists(element, min_size=columns, max_size=columns)
    return draw(st.lists(row, min_size=rows, max_size=rows))


# A recipe is (tag, payload); `materialise` turns it into the value under test.
value_recipes = st.one_of(
    st.tuples(st.just("python"), python_scalars),
    st.tuples(st.just("numpy scalar"), numpy_arrays(shapes=st.just(()))),
    st.tuples(st.just("numpy"), numpy_arrays()),
    st.tuples(st.just("list"), nested_lists()),
    st.tuples(st.just("jax"), numpy_arrays(dtypes=_NARROW_DTYPES)),
    st.tuples(
        st.just("jax weak"),
        st.one_of(st.integers(-(2**31), 2**31 - 1), st.floats(-1e6, 1e6)),
    ),
    st.tuples(
        st.just("other"),
        st.sampled_from(["none", "marker", "string", "object", "ragged"]),
    ),
)


def materialise(recipe):
    tag, payload = recipe
    if tag == "numpy scalar":
        return payload[()]
    if tag == "jax":
        return jnp.asarray(payload)
    if tag == "jax weak":
        return jnp.asarray(payload)
    if tag == "other":
        return {
            "none": None,
            "marker": Marker(),
            "string": "1.0",
            "object": object(),
            "ragged": [[1, 2], [3]],
        }[payload]
    return payload


_PYTHON_DTYPES = {bool: "bool", int: "int64", float: "float64", complex: "complex128"}


def source_of(value) -> tuple[np.dtype, list, tuple] | None:
    """(NumPy's dtype, elements as Python numbers, shape); None if not numeric."""
    if type(value) in _PYTHON_DTYPES:
        return np.dtype(_PYTHON_DTYPES[type(value)]), [value], ()
    if isinstance(value, (list, np.ndarray, np.generic, jax.Array)):
        try:
            array = np.asarray(value)
        except (ValueError, TypeError, OverflowError):
            return None
        if array.dtype.kind not in "biufc":
            return None
        return array.dtype, array.ravel().tolist(), array.shape
    return None


@dataclasses.dataclass
class Outcome:
    error: bool
    same_object: bool = False
    dtype: np.dtype | None = None


def expected(annotation: Annotation, value, x64: bool) -> Outcome:
    # README: a value of a type the union names besides arrays is stored as it is.
    if value is None or isinstance(value, annotation.admitted_as_is()):
        return Outcome(error=False, same_object=True)
    if type(value) not in (list, tuple) and _is_pytree_node(value):
        return Outcome(error=False, same_object=True)  # not arrayfield's to convert
    source = source_of(value)
    if source is None:
        return Outcome(error=True)
    dtype, elements, _ = source
    allowed = annotation.allowed
    if isinstance(value, jax.Array) and (allowed is None or dtype.name in allowed):
        return Outcome(error=False, same_object=True, dtype=dtype)
    # A NumPy result keeps NumPy's dtypes whatever x64 says.
    numpy_result = not isinstance(value, jax.Array) and (
        annotation.kind == "numpy"
        or (annotation.admits_numpy and isinstance(value, np.ndarray))
    )
    target = expected_dtype(allowed, dtype, x64 or numpy_result)
    if isinstance(value, jax.Array):  # a JAX array can only take JAX's dtypes
        target = np.dtype(canonical(np.dtype(target), x64))
    return Outcome(
        error=not all(fits(x, target) for x in elements), dtype=np.dtype(target)
    )


def _is_pytree_node(value) -> bool:
    leaves = jax.tree_util.tree_leaves(value)
    return len(leaves) != 1 or leaves[0] is not value


def assert_values_kept(value, stored, target: np.dtype) -> None:
    _, elements, shape = source_of(value)
    result = np.asarray(stored)
    assert result.shape == shape
    assert result.dtype == target
    tolerance = np.finfo(target).eps if target.kind in "fc" else 0
    tiny = np.finfo(target).smallest_subnormal if target.kind in "fc" else 0

    def rounded_alike(old: float, new: float) -> bool:
        # float narrowing (float64 -> float32, anything -> float16) rounds
        if new == old or (_is_nan(old) and _is_nan(new)):
            return True
        return abs(new - old) <= tolerance * abs(old) + tiny

    for old, new in zip(elements, result.ravel().tolist(), strict=True):
        if new == old:
            continue
        if isinstance(old, complex) and target.kind == "c":
            # part by part: an infinite part makes abs() of the difference nan
            new = complex(new)
            assert rounded_alike(old.real, new.real), (old, new)
            assert rounded_alike(old.imag, new.imag), (old, new)
        elif _is_nan(old) or _is_nan(new):
            assert _is_nan(old) and _is_nan(new), (old, new)
        elif isinstance(old, (float, complex)) and target.kind in "fc":
            assert rounded_alike(old, new), (old, new)
        else:
            assert new == old, (old, new)


# -- classes -------------------------------------------------------------------------

_UNTOUCHED = {"flag": int, "label": str, "fn": Callable, "anything": Any}


def make_classes(annotation: Annotation, name: str = "Probe"):
    """The ArrayModule class under test and its plain eqx.Module twin."""

    def namespace():
        return {
            "__annotations__": {
                "a": annotation.field_annotation(),
                **_UNTOUCHED,
                "frozen": annotation.field_annotation(),
            },
            "frozen": eqx.field(static=True),
            "__module__": __name__,
        }

    return (
        type(name, (af.ArrayModule,), namespace()),
        type(name, (eqx.Module,), namespace()),
    )


def untouched_values():
    return {
        "flag": 3,
        "label": "star",
        "fn": jnp.sin,
        # a single hashed leaf; containers have their own test below
        "anything": range(3),
        "frozen": 1.5,  # array-annotated, but static: a hashable Python float
    }


def structure(treedef) -> Any:
    """A treedef as nested tuples with node *names*, so twin classes compare equal."""
    if treedef.num_nodes == 1 and treedef.num_leaves == 1:
        return "*"
    node_type, aux = treedef.node_data()
    children = tuple(structure(child) for child in treedef.children())
    # repr: older equinox keeps node data in objects that compare by identity
    return node_type.__name__, repr(aux), children


@st.composite
def annotations(draw):
    if draw(st.integers(0, 5)) == 0:
        category, array_type = None, draw(st.sampled_from(_BARE_ARRAYS))
        inner = array_type
    else:
        category = draw(st.sampled_from(sorted(_CATEGORIES)))
        array_type = draw(st.sampled_from(_ARRAY_TYPES))
        inner = f"{category}[{array_type}, '...']"
    wrapper = draw(st.sampled_from(_WRAPPERS))
    return Annotation(
        text=wrapper.format(inner),
        as_string=draw(st.booleans()),
        category=category,
        array_type="np.ndarray" if array_type == "np.ndarray" else "jax",
    )


def _in_float_rounding_band(value) -> bool:
    """Python floats just above a float type's max, which round to max, not inf.

    arrayfield rejects these (see test_python_float_that_rounds_to_float16_max_...);
    excluded here so the property tests pin everything else.
    """
    if type(value) not in (float, complex):
        return False
    for part in (value.real, value.imag):
        for dtype in (np.float16, np.float32):
            with np.errstate(over="ignore"):
                rounded = np.asarray(part).astype(dtype)
            too_large = float(np.finfo(dtype).max) < abs(part)
            if math.isfinite(part) and too_large and np.isfinite(rounded):
                return True
    return False


def _wraps_between_signed_and_unsigned(value, outcome: Outcome) -> bool:
    """A rejected NumPy/JAX int value whose target has the other signedness.

    arrayfield stores these wrapped around (see test_negative_numpy_int_...);
    excluded here so the property tests pin everything else.
    """
    source = None if type(value) in _PYTHON_DTYPES else source_of(value)
    if not outcome.error or source is None or outcome.dtype is None:
        return False
    return {source[0].kind, outcome.dtype.kind} == {"i", "u"}


_COMPLEX_TO_REAL = "Casting from complex to real"


def _jax_warns_on_complex_to_real_astype() -> bool:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jnp.asarray([1 + 0j]).astype(jnp.float32)
    return any(_COMPLEX_TO_REAL in str(w.message) for w in caught)


_SETTINGS = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.mark.parametrize("x64", [False, True], ids=["x64_off", "x64_on"])
@_SETTINGS
@given(annotation=annotations(), recipe=value_recipes)
def test_conversion_follows_the_readme_rules(x64, annotation, recipe):
    with enable_x64(x64):
        value = materialise(recipe)
        Converted, Plain = make_classes(annotation)
        outcome = expected(annotation, value, x64)
        others = untouched_values()
        event("error" if outcome.error else f"stored {outcome.dtype or 'as is'}")

        if outcome.error:
            with pytest.raises(af.ConversionError, match=r"\bProbe\.a:"):
                Converted(a=value, **others)
            # normalize applies the same rules to a tree built without __init__
            built = Converted(a=None, **others)
            raw = eqx.tree_at(lambda m: m.a, built, value, is_leaf=_is_none)
            with pytest.raises(af.ConversionError, match=r"\bProbe\.a:"):
                af.normalize(raw)
            return

        module = Converted(a=value, **others)

        # non-array and static fields: the very same objects
        for name, original in others.items():
            assert getattr(module, name) is original

        stored = module.a
        if outcome.same_object:
            assert stored is value
        else:
            numpy_result = annotation.kind == "numpy" or (
                annotation.admits_numpy and isinstance(value, np.ndarray)
            )
            if numpy_result and not isinstance(value, jax.Array):
                assert type(stored) is np.ndarray
            else:
                assert isinstance(stored, jax.Array) and not stored.weak_type
            assert_values_kept(value, stored, outcome.dtype)

        # idempotent: normalize and re-construction change nothing
        assert af.normalize(module) is module
        again = Converted(a=stored, **others)
        assert type(again.a) is type(stored)
        if isinstance(stored, jax.Array):
            assert again.a is stored
        if isinstance(stored, (jax.Array, np.ndarray)):
            assert again.a.dtype == stored.dtype

        # a tree built without __init__: normalize converts once, then is a no-op
        raw = eqx.tree_at(lambda m: m.a, module, value, is_leaf=_is_none)
        once = af.normalize(raw)
        assert af.normalize(once) is once
        assert all(getattr(once, n) is v for n, v in others.items())
        if isinstance(stored, (jax.Array, np.ndarray)):
            assert once.a.dtype == np.asarray(stored).dtype
            assert_values_kept(value, once.a, outcome.dtype or stored.dtype)

        # same leaves and tree structure as eqx.Module given the arrays by hand
        plain = Plain(a=stored, **others)
        converted_def = jax.tree_util.tree_structure(module)
        plain_def = jax.tree_util.tree_structure(plain)
        assert converted_def.num_leaves == plain_def.num_leaves
        assert structure(converted_def) == structure(plain_def)
        for mine, theirs in zip(
            jax.tree_util.tree_leaves(module),
            jax.tree_util.tree_leaves(plain),
            strict=True,
        ):
            assert mine is theirs


def _is_none(node) -> bool:
    return node is None


@settings(max_examples=60, deadline=None)
@given(annotation=annotations(), array=numpy_arrays(dtypes=_NARROW_DTYPES))
def test_tracers_get_the_dtype_eager_construction_gives(annotation, array):
    """Under jit and vmap a tracer is stored as it is when its dtype is allowed and
    converted like a concrete array when that only widens (bool -> int -> float ->
    complex); a narrowing that only values could check leaves it as it is."""
    Converted, _ = make_classes(annotation)
    others = untouched_values()
    x = jnp.asarray(array)
    outcome = expected(annotation, x, x64=False)
    allowed = annotation.allowed
    if allowed is None or x.dtype.name in allowed:
        want = x.dtype
    elif _LEVEL[outcome.dtype.kind] > _LEVEL[x.dtype.kind] or (
        outcome.dtype.kind == x.dtype.kind and x.dtype.kind in "fc"
    ):
        want = outcome.dtype
    else:
        want = x.dtype  # a lower kind: left as it is under a trace
    seen = []

    def build(x):
        module = Converted(a=x, **others)
        seen.append((module.a is x, module.a.dtype, module.a.weak_type))
        assert all(getattr(module, n) is v for n, v in others.items())
        return module.a

    out = jax.jit(build)(x)
    assert out.dtype == want
    batch = jnp.stack([x, x])
    out = jax.vmap(build)(batch)
    assert out.dtype == want and out.shape == batch.shape
    kept = want == x.dtype
    assert seen == [(kept, want, False)] * 2


@settings(max_examples=40, deadline=None)
@given(annotation=annotations())
def test_structure_with_none_matches_plain_module(annotation):
    Converted, Plain = make_classes(annotation)
    others = untouched_values()
    converted = jax.tree_util.tree_structure(Converted(a=None, **others))
    plain = jax.tree_util.tree_structure(Plain(a=None, **others))
    # flag, label, fn and anything; None and the static field: no leaves
    assert converted.num_leaves == plain.num_leaves == 4
    assert structure(converted) == structure(plain)


# -- the oracle itself, on the README's table ------------------------------------


@pytest.mark.parametrize(
    "category, one, one_and_half, true, half_float",
    [
        ("Float", "float32", "float32", "float32", "float16"),
        ("Int", "int32", None, "int32", "int32"),
        ("UInt", "uint32", None, "uint32", "uint32"),
        ("Bool", "bool", None, "bool", "bool"),
        ("Complex", "complex64", "complex64", "complex64", "complex64"),
        ("Float32", "float32", "float32", "float32", "float32"),
        ("Int8", "int8", None, "int8", "int8"),
        ("Shaped", "int32", "float32", "bool", "float16"),
        ("Num", "int32", "float32", "int32", "float16"),
        ("Real", "int32", "float32", "int32", "float16"),
        ("Inexact", "float32", "float32", "float32", "float16"),
    ],
)
def test_oracle_reproduces_the_readme_table(
    category, one, one_and_half, true, half_float
):
    annotation = Annotation(f"{category}[Array, '']", False, category, "jax")
    for value, dtype in [
        (1, one),
        (1.5, one_and_half),
        (True, true),
        (np.float16(1), half_float),
    ]:
        outcome = expected(annotation, value, x64=False)
        assert outcome.error is (dtype is None)
        if dtype is not None:
            assert outcome.dtype == np.dtype(dtype)


@pytest.mark.parametrize(
    "annotation, value",
    [
        (Float16[Array, ""], 65510.0),  # np.float16(65510.0) == 65504.0
        (Float[Array, ""], 3.4028235e38),  # the repr of float32 max
    ],
)
def test_python_float_that_rounds_to_the_max_is_stored_like_numpy_does(
    annotation, value
):
    Probe = type("Probe", (af.ArrayModule,), {"__annotations__": {"a": annotation}})
    from_numpy = Probe(a=np.float64(value)).a
    assert np.isfinite(from_numpy)
    assert Probe(a=value).a == from_numpy


@pytest.mark.parametrize("items", [[1, 2.5], (1, 2), {"k": 1}])
def test_normalize_returns_a_module_with_an_unchanged_container_field_as_is(items):
    Probe = type(
        "Probe",
        (af.ArrayModule,),
        {"__annotations__": {"a": Float[Array, ""], "items": Any}},
    )
    module = Probe(a=1.0, items=items)
    once = af.normalize(module)
    assert once.items is items
    assert once is module
    assert af.normalize(once) is once


@pytest.mark.parametrize(
    "annotation, value",
    [
        (UInt[Array, ""], np.int8(-1)),  # stored as uint32 4294967295
        (UInt[Array, ""], jnp.int32(-5)),  # stored as uint32 4294967291
        (Int[Array, ""], np.uint32(2**32 - 1)),  # stored as int32 -1
    ],
)
def test_negative_numpy_int_into_unsigned_field_is_an_error(annotation, value):
    Probe = type("Probe", (af.ArrayModule,), {"__annotations__": {"a": annotation}})
    with pytest.raises(af.ConversionError, match=r"Probe\.a"):
        Probe(a=value)


def test_complex_jax_array_into_float_field_warns_nothing():
    Probe = type(
        "Probe", (af.ArrayModule,), {"__annotations__": {"a": Float[Array, "2"]}}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stored = Probe(a=jnp.asarray([1 + 0j, 2 + 0j])).a
    assert stored.dtype == jnp.float32 and stored.tolist() == [1.0, 2.0]
