"""(value, ArraySpec) -> array: the per-value hot path.

Pure: knows nothing about classes or fields. A value that cannot become the array
its spec asks for raises `Rejected` with the reason in words; the module layer adds
the class, field and annotation to make it a `ConversionError`.

What is converted: values the annotation does not admit as they are. A value of a
non-array member of the annotation's union (a Python number in `int | Array`, a
Module in `Module | Array`) is stored unchanged; so are JAX arrays whose dtype the
annotation allows (weakly typed ones stay weak), tracers of such dtypes, and pytrees
that are not arrays (equinox's loop buffers, quax-style array values).

Dtype rule for what is converted: a value gets the dtype `jnp.asarray` would give it
(NumPy's dtype, canonicalised by JAX, so `jax_enable_x64` is honoured at conversion
time), strongly typed; a NumPy result keeps NumPy's own dtype. If the annotation does
not allow that dtype, the value takes the default dtype of the nearest kind the
annotation does allow (bool -> int -> float -> complex), and the conversion is
checked to be exact.
"""

from __future__ import annotations

import copy
import math
import warnings
from typing import Any

import jax
import jax.core  # jax/__init__ does not re-export it for type checkers
import jax.numpy as jnp
import numpy as np

from . import _facts
from ._errors import short_repr
from ._facts import PYTHON_NUMBERS, is_module
from ._spec import ArraySpec, ContainerSpec, FieldSpec


class Rejected(Exception):
    """The value cannot be stored in the field; the message says why."""


# Order of preference when the annotation does not allow the value's own kind.
_KIND_FALLBACK = {
    "b": "biufc",
    "i": "iufcb",
    "u": "uifcb",
    "f": "fciub",
    "c": "cfiub",
}
_KIND_DEFAULT = {
    "b": np.dtype(np.bool_),
    "i": np.dtype(np.int64),
    "u": np.dtype(np.uint64),
    "f": np.dtype(np.float64),
    "c": np.dtype(np.complex128),
}
_Tracer = jax.core.Tracer


def _x64() -> bool:
    return bool(jax.config.jax_enable_x64)  # pyright: ignore[reportAttributeAccessIssue]


def _canonical(dtype: np.dtype, x64: bool) -> np.dtype:
    """JAX's canonical dtype: 64-bit types become 32-bit unless x64 is on."""
    if x64 or dtype.itemsize < 8:
        return dtype
    return np.dtype(jax.dtypes.canonicalize_dtype(dtype))


def canonical_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype JAX gives a value of NumPy dtype `dtype`, under the current x64."""
    return _canonical(dtype, _x64())


def target_dtype(spec: ArraySpec, dtype: np.dtype, x64: bool) -> np.dtype:
    """The dtype a value of `dtype` is stored as in a field described by `spec`."""
    key = (dtype, x64)
    try:
        return spec.target_cache[key]
    except KeyError:
        pass
    own = _canonical(dtype, x64)
    allowed = spec.dtypes
    if allowed is None or own.name in allowed:
        result = own
    else:
        result = _nearest_allowed(allowed, dtype.kind, x64)
    if spec.kind == "jax":
        # A JAX array cannot hold a 64-bit dtype without x64 (an `Int64` field):
        # check values against the dtype it will really have.
        result = _canonical(result, x64)
    spec.target_cache[key] = result
    return result


def _nearest_allowed(allowed: frozenset[str], kind: str, x64: bool) -> np.dtype:
    order = _KIND_FALLBACK.get(kind, "biufc")
    for k in order:
        default = _canonical(_KIND_DEFAULT[k], x64)
        if default.name in allowed:
            return default
    for k in order:
        of_kind = [np.dtype(n) for n in allowed if _dtype_kind(n) == k]
        if of_kind:
            return max(of_kind, key=lambda d: d.itemsize)
    # Only exotic dtypes (float8, int4, ...): take the widest of them.
    return max((np.dtype(n) for n in allowed), key=lambda d: d.itemsize)


def _dtype_kind(name: str) -> str | None:
    try:
        return np.dtype(name).kind
    except TypeError:
        return None


def _check_exact(original: np.ndarray, converted: np.ndarray) -> None:
    """Raise `Rejected` if casting `original` to `converted.dtype` changed a value.

    Losing float precision (float64 -> float32, JAX's normal behaviour without x64)
    is allowed; a finite value turning into inf is not.
    """
    src, dst = original.dtype, converted.dtype
    if src == dst:
        return
    if src.kind == "c" and dst.kind == "f":
        imaginary = np.imag(original) != 0
        if np.any(imaginary):
            index = tuple(int(i) for i in np.argwhere(imaginary)[0])
            where = f"element {list(index)}" if index else "it"
            raise Rejected(f"{where} has an imaginary part a {dst.name} cannot hold")
        original = np.real(original)  # from here on, a float narrowing
        src = original.dtype
    if src.kind in "fc" and dst.kind in "fc":  # float -> complex or narrower float
        if not np.all(np.isfinite(converted) | ~np.isfinite(original)):
            raise Rejected(f"it overflows {dst.name} (the result would be inf)")
        flushed = _flushed_to_zero(original, converted)
        if np.any(flushed):
            index = tuple(int(i) for i in np.argwhere(flushed)[0])
            where = (
                f"element {list(index)}, {original[index].item()!r}," if index else "it"
            )
            raise Rejected(_underflow_reason(dst, where))
        return
    if src.kind in "biu" and dst.kind in "iu" and original.size:
        # The round trip below cannot see wrap-around (int8 -1 -> uint32 -> int8 -1).
        low, high = _integer_bounds(dst)
        smallest, largest = original.min().item(), original.max().item()
        if smallest < low or largest > high:
            bad = smallest if smallest < low else largest
            raise Rejected(f"{bad!r} does not fit in {dst.name}")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back = converted.astype(src)
    if not np.array_equal(back, original, equal_nan=src.kind in "fc"):
        changed = _first_changed(original, converted, back)
        raise Rejected(f"converting it to {dst.name} would change {changed}")


def _flushed_to_zero(original: np.ndarray, converted: np.ndarray) -> np.ndarray:
    """Where a nonzero float (a nonzero part of a complex) became zero.

    Rounding to a subnormal only loses precision; reaching zero loses the value.
    """
    if original.dtype.kind == "c" and converted.dtype.kind == "c":
        real = _flushed_to_zero(np.real(original), np.real(converted))
        return real | _flushed_to_zero(np.imag(original), np.imag(converted))
    return (original != 0) & (converted == 0)


def _underflow_reason(dtype: np.dtype, where: str = "it") -> str:
    tiny = np.finfo(dtype).smallest_subnormal
    return (
        f"{where} underflows {dtype.name} (the result would be 0.0; the smallest "
        f"nonzero {dtype.name} is {float(tiny):.3g}). Rescale it, or annotate a "
        "wider dtype (64-bit ones need jax_enable_x64)"
    )


def _first_changed(original: np.ndarray, converted: np.ndarray, back: np.ndarray):
    if original.ndim == 0:
        return f"its value to {converted.item()!r}"
    index = tuple(int(i) for i in np.argwhere(back != original)[0])
    old, new = original[index].item(), converted[index].item()
    return f"element {list(index)} from {old!r} to {new!r}"


def _device_array(array: np.ndarray) -> jax.Array:
    return jnp.asarray(array)


# A NumPy scalar becomes a JAX array in ~6 us through jit's C++ dispatch, against
# ~16 us for `jnp.asarray`, which binds a primitive through Python. The result is the
# same: strong, uncommitted, on the default device; a tracer under a transform. jit
# compiles once per dtype and shape (~10 ms), so only 0-d arrays take this path.
_scalar_to_jax = jax.jit(_device_array)


def _from_numpy(array: np.ndarray, spec: ArraySpec, x64: bool, to_numpy: bool):
    """`array` as the field stores it: a NumPy array if `to_numpy`, else JAX's."""
    if array.dtype.kind not in "biufc":
        raise Rejected(f"it is not numeric (NumPy dtype {array.dtype})")
    # A NumPy result keeps NumPy's dtypes: float64 stays float64 without x64.
    target = target_dtype(spec, array.dtype, x64 or to_numpy)
    if target != array.dtype:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            converted = array.astype(target)
        _check_exact(array, converted)
        array = converted
    if to_numpy:
        return array
    return _scalar_to_jax(array) if array.ndim == 0 else jnp.asarray(array)


def _from_python_scalar(value: Any, spec: ArraySpec, x64: bool):
    # Into a NumPy field, a Python number takes NumPy's dtype for it (float64...).
    x64 = x64 or spec.kind == "numpy"
    target = target_dtype(spec, _KIND_DEFAULT[_PYTHON_KIND[type(value)]], x64)
    if type(value) is complex and target.kind != "c":
        if value.imag != 0:
            raise Rejected(f"a {target.name} field cannot hold its imaginary part")
        value = value.real
    if target.kind in "fc" and _overflows(value, target):
        raise Rejected(f"it overflows {target.name} (the result would be inf)")
    if target.kind in "iu" and not _fits_integer(value, target):
        # Checked here: NumPy < 2 wraps out-of-range Python ints silently.
        raise Rejected(f"it does not fit in {target.name}")
    try:
        array = np.asarray(value, dtype=target)
    except OverflowError:
        raise Rejected(f"it does not fit in {target.name}") from None
    except ValueError:  # nan or inf into an integer dtype
        raise Rejected(f"{target.name} cannot represent it") from None
    _check_scalar_exact(value, array)
    if spec.kind == "numpy":
        return array
    return _scalar_to_jax(array)


def _check_scalar_exact(value: bool | int | float | complex, array: np.ndarray) -> None:
    """`_check_exact` for a Python scalar, in Python arithmetic.

    Python compares int with float exactly, and its ints can be wider than int64.
    """
    if isinstance(value, (float, complex)) and array.dtype.kind in "fc":
        # Float precision may narrow (JAX's normal behaviour); a value may not
        # vanish. Compared as Python numbers: numpy on 0-d values costs ~10 us.
        stored = array.item()
        parts = (
            ((value.real, stored.real), (value.imag, stored.imag))
            if isinstance(value, complex) or isinstance(stored, complex)
            else ((value, stored),)
        )
        if any(given != 0 and kept == 0 for given, kept in parts):
            raise Rejected(_underflow_reason(array.dtype))
        return
    stored = array.item()
    if stored != value:
        raise Rejected(
            f"converting it to {array.dtype.name} would change its value to {stored!r}"
        )


_FLOAT_MAX: dict[np.dtype, float] = {}
_INT_BOUNDS: dict[np.dtype, tuple[int, int]] = {}


def _integer_bounds(dtype: np.dtype) -> tuple[int, int]:
    bounds = _INT_BOUNDS.get(dtype)
    if bounds is None:
        info = np.iinfo(dtype)
        bounds = _INT_BOUNDS[dtype] = (int(info.min), int(info.max))
    return bounds


def _fits_integer(number: float | complex, target: np.dtype) -> bool:
    """Whether `number` lies within the range of the integer dtype `target`.

    NaN and infinities pass here; the exactness check rejects them afterwards.
    """
    bounds = _integer_bounds(target)
    real = number.real
    return not math.isfinite(real) or bounds[0] <= real <= bounds[1]


def _overflows(number: int | float | complex, target: np.dtype) -> bool:
    """Whether a finite `number` rounds to inf in the float/complex `target`."""
    limit = _FLOAT_MAX.get(target)
    if limit is None:
        # Rounding reaches inf from max + half a step (the step just below max).
        largest = np.finfo(target).max
        step = float(largest) - float(np.nextafter(largest, largest.dtype.type(0)))
        limit = _FLOAT_MAX[target] = float(largest) + step / 2
    if type(number) is float:  # the common case, without a generator
        return abs(number) >= limit and math.isfinite(number)
    if type(number) is not complex:  # an int (Python compares it with floats exactly)
        return abs(number) >= limit
    parts = (number.real, number.imag)
    return any(math.isfinite(p) and abs(p) >= limit for p in parts)


_PYTHON_KIND = dict(zip(PYTHON_NUMBERS, "bifc", strict=True))  # number -> dtype kind
_NEEDS_KEY = "a PRNG key field needs a key array, e.g. jax.random.key(0)"


def dtype_set(names: frozenset[str]) -> frozenset[np.dtype]:
    """The dtypes named in `names`, so a dtype's membership is a hash lookup.

    `dtype.name` costs ~2 us (NumPy builds the string on every access); hashing a
    dtype costs ~50 ns. Only names that round-trip are kept, so `d in result` holds
    exactly when `d.name in names`.
    """
    found = _DTYPE_SETS.get(names)
    if found is None:
        dtypes = []
        for name in names:
            try:
                dtype = jnp.dtype(name)
            except TypeError:
                continue
            if dtype.name == name:
                dtypes.append(dtype)
        found = _DTYPE_SETS[names] = frozenset(dtypes)
    return found


_DTYPE_SETS: dict[frozenset[str], frozenset[np.dtype]] = {}


def _jax_target(dtype: np.dtype, spec: ArraySpec) -> np.dtype | None:
    """The dtype a JAX array (or tracer) of `dtype` must take; None to keep it."""
    allowed = spec.dtypes
    if spec.is_key or allowed is None or dtype in dtype_set(allowed):
        return None  # stored as is, weak type and all: no copy
    x64 = _x64()
    # A JAX array stays one, even in a NumPy field: it can only take JAX's dtypes.
    target = _canonical(target_dtype(spec, np.dtype(dtype), x64), x64)
    # e.g. float32 in a Float64 field without x64: already so
    return None if target == dtype else target


def _from_jax(array: jax.Array, spec: ArraySpec):
    target = _jax_target(array.dtype, spec)
    if target is None:
        return array
    # Rare path (a JAX array of a dtype the annotation does not allow): check the
    # values on the host with the same rule as NumPy input.
    host = np.asarray(array)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check_exact(host, host.astype(target))
    if array.dtype.kind == "c" and target.kind != "c":
        array = array.real  # imaginary parts are all zero (checked above)
    return array.astype(target)


# Kinds in the order they widen (bool -> int -> float -> complex).
_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _from_tracer(tracer: Any, spec: ArraySpec):
    """The dtype `_from_jax` would give a concrete array, where that needs no values.

    So eager and jitted construction store the same dtype. A conversion to a lower
    kind (float -> int, complex -> float) can only be checked on values, so a tracer
    that would need one is stored as it is; the others are `astype`'s (values a
    concrete array would be rejected for, such as an int above 2**24 into float32,
    round as JAX rounds them).
    """
    dtype = tracer.dtype
    target = _jax_target(dtype, spec)
    if target is None:
        return tracer
    source_rank = _KIND_RANK.get(dtype.kind, 4)
    target_rank = _KIND_RANK.get(target.kind, -1)
    same_inexact_kind = target.kind == dtype.kind and dtype.kind in "fc"
    if not (target_rank > source_rank or same_inexact_kind):
        return tracer
    return jax.lax.convert_element_type(tracer, target)


def to_array(value: Any, spec: ArraySpec) -> Any:
    """Convert one field value as `spec` says; see the module docstring for the rules.

    Returns the value itself when nothing needs doing: values of a non-array type
    the annotation names, `None` (so the pytree's leaf count never changes), JAX
    arrays and tracers of an allowed dtype, `jax.ShapeDtypeStruct`, and pytrees that
    are not arrays.
    """
    kind = type(value)
    if kind is _facts.array_class:  # one type test instead of two isinstance
        # Hot path, inlined: an array that is already right is stored as it is.
        allowed = spec.dtypes
        # `.aval.dtype` is about half the cost of `.dtype` on a concrete array.
        if allowed is None or value.aval.dtype in dtype_set(allowed):
            return value
        if spec.passthrough and isinstance(value, spec.passthrough):
            return value  # as below, for arrays not yet seen on this path
        return _from_jax(value, spec)
    passthrough = spec.passthrough
    if passthrough and isinstance(value, passthrough):
        return value  # the annotation admits it as it is: `int | Array` and 1
    if kind in _PYTHON_KIND:
        if spec.is_key:
            raise Rejected(_NEEDS_KEY)
        return _from_python_scalar(value, spec, _x64())
    if isinstance(value, jax.Array):
        if isinstance(value, _Tracer):
            return _from_tracer(value, spec)
        if jnp.issubdtype(value.dtype, jax.dtypes.prng_key):
            if spec.is_key or spec.dtypes is None:
                return value
            raise Rejected("a PRNG key array is not an array of numbers")
        _facts.learn_array_class(value)  # the next one takes the path above
        return _from_jax(value, spec)
    if value is None:
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        if spec.is_key:
            raise Rejected(_NEEDS_KEY)
        # A NumPy array stays one where the annotation admits NumPy arrays.
        keep_numpy = spec.admits_numpy and isinstance(value, np.ndarray)
        to_numpy = spec.kind == "numpy" or keep_numpy
        return _from_numpy(np.asarray(value), spec, _x64(), to_numpy)
    if isinstance(value, jax.ShapeDtypeStruct):
        return value
    if kind is list or kind is tuple:
        if spec.is_key:
            raise Rejected(_NEEDS_KEY)
        return _from_sequence(value, spec)
    for number_type in _PYTHON_KIND:  # an IntEnum, a float subclass...
        if isinstance(value, number_type) and not spec.is_key:
            return _from_python_scalar(number_type(value), spec, _x64())
    if not jax.tree_util.all_leaves([value]):
        # A pytree node (an equinox loop buffer, a quax-style value, a NamedTuple):
        # not ours to convert; its own leaves are what JAX traces.
        return value
    raise Rejected(f"{type(value).__name__!r} is not an array type")


def to_field_value(value: Any, spec: FieldSpec) -> Any:
    """`to_array` for an array spec, element by element for a container spec."""
    if type(spec) is ArraySpec:
        return to_array(value, spec)
    return _to_container(value, spec)  # type: ignore[arg-type]


def _to_container(value: Any, spec: ContainerSpec) -> Any:
    """Convert each element of a container; the same object if none changes.

    A list and a tuple stand in for each other (the given one is kept), any `dict`
    for a `dict`; anything else is not the container the annotation asks for.
    """
    kind = spec.container
    if kind == "pytree":
        element = spec.elements[0]
        leaves, treedef = jax.tree_util.tree_flatten(value, is_leaf=is_module)
        new = [_element(leaf, element, "a leaf") for leaf in leaves]
        if all(n is o for n, o in zip(new, leaves, strict=True)):
            return value
        return jax.tree_util.tree_unflatten(treedef, new)
    if value is None:  # as for an array field: the leaf count of eqx.Module's
        return value
    if kind == "dict":
        if not isinstance(value, dict):
            raise Rejected("the annotation asks for a dict of arrays")
        element = spec.elements[0]
        items = {k: _element(v, element, f"element [{k!r}]") for k, v in value.items()}
        if all(items[k] is v for k, v in value.items()):
            return value
        rebuilt = copy.copy(value)  # the same mapping type (OrderedDict, ...)
        rebuilt.update(items)
        return rebuilt
    if not isinstance(value, (list, tuple)) or type(value) not in (list, tuple):
        raise Rejected(f"the annotation asks for a {kind} of arrays")
    if spec.fixed:
        if len(value) != len(spec.elements):
            raise Rejected(
                f"it has {len(value)} elements where the annotation names "
                f"{len(spec.elements)}"
            )
        specs = spec.elements
    else:
        specs = spec.elements * len(value)
    new = [
        _element(v, s, f"element [{i}]")
        for i, (v, s) in enumerate(zip(value, specs, strict=True))
    ]
    if all(n is o for n, o in zip(new, value, strict=True)):
        return value
    return type(value)(new)


def _element(value: Any, spec: FieldSpec, where: str) -> Any:
    try:
        return to_field_value(value, spec)
    except Rejected as reason:
        raise Rejected(f"{where}, {short_repr(value, 40)}: {reason}") from None


def looks_numeric(value: Any) -> bool:
    """Whether `value` is numeric data: a number, a NumPy value or a rectangular
    nested list/tuple of numbers (what conversion would have turned into an array).
    """
    if isinstance(value, (*_PYTHON_KIND, np.number, np.bool_)):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "biufc"
    if type(value) not in (list, tuple):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            array = np.asarray(value)
        except (ValueError, TypeError):
            return False
    return array.dtype.kind in "biufc"


def _from_sequence(value: list | tuple, spec: ArraySpec):
    leaves = jax.tree_util.tree_leaves(value)
    traced = any(isinstance(leaf, _Tracer) for leaf in leaves)
    if traced or (
        spec.kind == "jax" and any(isinstance(leaf, jax.Array) for leaf in leaves)
    ):
        # JAX stacks them by its own promotion rules, on the device: the same dtype
        # eagerly as under a transform, where they are tracers.
        stacked = jnp.asarray(value)
        return _from_tracer(stacked, spec) if traced else _from_jax(stacked, spec)
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as error:
        raise Rejected(f"it is not a rectangular array of numbers ({error})") from None
    return _from_numpy(array, spec, _x64(), spec.kind == "numpy")
