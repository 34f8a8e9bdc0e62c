"""(value, ArraySpec) -> array: the per-value hot path.

Pure: knows nothing about classes or fields. A value that cannot become the array
its spec asks for raises `Rejected` with the reason in words; the module layer adds
the class, field and annotation to make it a `ConversionError`.

Dtype rule: a value gets the dtype `jnp.asarray` would give it (NumPy's dtype,
canonicalised by JAX, so `jax_enable_x64` is honoured at conversion time), made
strong. If the annotation does not allow that dtype, the value takes the default
dtype of the nearest kind the annotation does allow (bool -> int -> float ->
complex), and the conversion is checked to be exact.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import jax
import jax.core  # jax/__init__ does not re-export it for type checkers
import jax.numpy as jnp
import numpy as np

from ._spec import ArraySpec


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
# Types seen to be concrete JAX arrays (jax.Array but not a tracer): in practice one.
CONCRETE_ARRAY_TYPES: set[type] = set()


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


def _from_numpy(array: np.ndarray, spec: ArraySpec, x64: bool):
    if array.dtype.kind not in "biufc":
        raise Rejected(f"it is not numeric (NumPy dtype {array.dtype})")
    target = target_dtype(spec, array.dtype, x64)
    if target != array.dtype:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            converted = array.astype(target)
        _check_exact(array, converted)
        array = converted
    if spec.kind == "numpy":
        return array
    return _scalar_to_jax(array) if array.ndim == 0 else jnp.asarray(array)


def _from_python_scalar(value: Any, spec: ArraySpec, x64: bool):
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
        return  # float precision may narrow; that is JAX's normal behaviour
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


_PYTHON_KIND = {bool: "b", int: "i", float: "f", complex: "c"}


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


def _from_jax(array: jax.Array, spec: ArraySpec):
    if spec.is_key:
        return array
    dtype = array.dtype
    allowed = spec.dtypes
    if allowed is None or dtype in dtype_set(allowed):
        if not array.weak_type:
            return array  # the common case: stored as is, no copy
        return jax.lax.convert_element_type(array, dtype)  # same dtype, now strong
    x64 = _x64()
    # A JAX array stays one, even in a NumPy field: it can only take JAX's dtypes.
    target = _canonical(target_dtype(spec, np.dtype(dtype), x64), x64)
    if target == dtype:  # e.g. float32 in a Float64 field without x64: already so
        if not array.weak_type:
            return array
        return jax.lax.convert_element_type(array, dtype)
    # Rare path (a JAX array of a dtype the annotation does not allow): check the
    # values on the host with the same rule as NumPy input.
    host = np.asarray(array)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check_exact(host, host.astype(target))
    if dtype.kind == "c" and target.kind != "c":
        array = array.real  # imaginary parts are all zero (checked above)
    return array.astype(target)


def to_array(value: Any, spec: ArraySpec) -> Any:
    """Convert one field value as `spec` says; see the module docstring for the rules.

    Returns the value itself when nothing needs doing: `None` (so the pytree's leaf
    count never changes), tracers (construction under `jit`/`vmap`/`grad` must work),
    `jax.ShapeDtypeStruct`, values of other types the annotation's union admits, and
    JAX arrays that already have an allowed dtype and are strongly typed.
    """
    kind = type(value)
    if kind in CONCRETE_ARRAY_TYPES:  # one set lookup instead of two isinstance
        # Hot path, inlined: an array that is already right is stored as it is.
        allowed = spec.dtypes
        aval = value.aval  # one property read instead of .weak_type and .dtype
        if not aval.weak_type and (allowed is None or aval.dtype in dtype_set(allowed)):
            return value
        return _from_jax(value, spec)
    if kind in _PYTHON_KIND:
        if spec.is_key:
            raise Rejected("a PRNG key field needs a key array, e.g. jax.random.key(0)")
        return _from_python_scalar(value, spec, _x64())
    if isinstance(value, jax.Array):
        if isinstance(value, _Tracer):
            return value
        if jnp.issubdtype(value.dtype, jax.dtypes.prng_key):
            if spec.is_key or spec.dtypes is None:
                return value
            raise Rejected("a PRNG key array is not an array of numbers")
        if hasattr(value, "aval"):  # what the fast path above reads
            CONCRETE_ARRAY_TYPES.add(kind)
        return _from_jax(value, spec)
    if value is None:
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        if spec.is_key:
            raise Rejected("a PRNG key field needs a key array, e.g. jax.random.key(0)")
        return _from_numpy(np.asarray(value), spec, _x64())
    if isinstance(value, jax.ShapeDtypeStruct):
        return value
    if spec.passthrough and isinstance(value, spec.passthrough):
        return value
    if isinstance(value, (list, tuple)) and not spec.is_key:
        return _from_sequence(value, spec)
    for number_type in _PYTHON_KIND:  # an IntEnum, a float subclass...
        if isinstance(value, number_type) and not spec.is_key:
            return _from_python_scalar(number_type(value), spec, _x64())
    raise Rejected(f"{type(value).__name__!r} is not an array type")


def looks_numeric(value: Any) -> bool:
    """Whether conversion would turn `value` into an array (for warnings)."""
    return isinstance(value, (*_PYTHON_KIND, np.generic, np.ndarray, list, tuple))


def _from_sequence(value: list | tuple, spec: ArraySpec):
    leaves = jax.tree_util.tree_leaves(value)
    if any(isinstance(leaf, _Tracer) for leaf in leaves):
        # Under a transform: let JAX stack the tracers.
        stacked = jnp.asarray(value)
        return _from_jax(stacked, spec)
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as error:
        raise Rejected(f"it is not a rectangular array of numbers ({error})") from None
    return _from_numpy(array, spec, _x64())
