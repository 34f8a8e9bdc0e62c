"""What the jit cache sees of one call: a signature of every argument leaf.

A leaf is either an abstract array (shape, dtype, weak type) or a value hashed into
the cache key; static fields are listed too. `explain_retraces` builds one
signature per call that traced and compares it with earlier ones (`_diff.py`).
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any

import jax
import jax.tree_util as jtu
import numpy as np

from .._convert import canonical_dtype
from .._errors import short_repr
from .._facts import PYTHON_NUMBERS
from ._paths import FieldRef, is_array, walk


@dataclasses.dataclass(frozen=True)
class LeafSig:
    """What the jit cache sees of one leaf: an abstract array or a hashed value."""

    kind: str  # "array", "hashed" (a non-array leaf) or "static" (a static field)
    key: Any  # (shape, dtype, weak_type) for arrays, the value itself otherwise
    type: type
    text: str
    field: FieldRef | None
    scalar: Any = None  # a Python number that jax.jit traced (its value, kept)
    within: FieldRef | None = None  # the field it is in, maybe inside a container
    within_shape: tuple[int, ...] | None = None  # that container's, if numbers

    @property
    def named_by(self) -> FieldRef | None:
        """The field a hint names: the one holding the leaf, or the one it is in."""
        return self.field or self.within

    def same(self, other: LeafSig) -> bool:
        if self.kind != other.kind:
            return False
        if self.kind == "array":
            return self.key == other.key
        return equal(self.key, other.key)


def equal(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b) and hash(a) == hash(b)
    except Exception:
        return False


def _canonical(dtype: Any) -> Any:
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        return dtype  # extended dtypes (PRNG keys) are already what jit sees
    return canonical_dtype(dtype)


def _array_key(x: Any) -> tuple[tuple[int, ...], Any, bool]:
    aval = getattr(x, "aval", None)
    if aval is not None:  # tracers and jax arrays
        return tuple(aval.shape), aval.dtype, bool(getattr(aval, "weak_type", False))
    return tuple(np.shape(x)), _canonical(x.dtype), False


def _scalar_key(x: Any) -> tuple[tuple[int, ...], Any, bool]:
    """How `jax.jit` sees a Python number it traces: a weakly typed 0-d array."""
    dtype = {bool: np.bool_, int: np.int64, float: np.float64, complex: np.complex128}
    return (), _canonical(dtype[type(x)]), type(x) is not bool


@dataclasses.dataclass
class Signature:
    leaves: dict[str, LeafSig]
    structure: dict[str, Any]  # parameter name -> treedef
    has_numbers: bool
    # For the per-call reuse check: the flat view `jtu.tree_flatten` gives.
    treedef: Any
    arrays: tuple[tuple[int, Any], ...]  # (leaf index, (shape, dtype, weak_type))
    hashed: tuple[tuple[int, Any, type], ...]  # (leaf index, value, type)

    def reused_by(self, flat: list[Any], treedef: Any) -> bool:
        """Whether a call with these flat leaves hits the trace this call made."""
        return (
            self.treedef == treedef
            and all(
                is_array(flat[i]) and _array_key(flat[i]) == key
                for i, key in self.arrays
            )
            and all(
                not is_array(flat[i]) and equal(value, flat[i])
                for i, value, _ in self.hashed
            )
        )


def leaf_text(value: Any) -> str:
    """A one-line text for a hashed leaf; callables without their addresses, so
    two equal-looking ones read alike: `functools.partial(step, factor=0.1)`."""
    if isinstance(value, functools.partial):
        parts = [_callable_name(value.func)]
        parts.extend(short_repr(a, 30) for a in value.args)
        parts.extend(f"{k}={short_repr(v, 30)}" for k, v in value.keywords.items())
        text = f"functools.partial({', '.join(parts)})"
        return text if len(text) <= 80 else text[:76] + "...)"
    if isinstance(value, types.FunctionType | types.MethodType):
        return f"<{_callable_name(value)}>"
    wrapped = getattr(value, "__wrapped__", None)
    if hasattr(value, "lower") and isinstance(wrapped, types.FunctionType):
        return f"jax.jit(<{_callable_name(wrapped)}>)"  # a jax.jit wrapper
    return short_repr(value)


def _callable_name(fn: Any) -> str:
    if isinstance(fn, types.MethodType):
        owner = type(fn.__self__).__qualname__
        return f"bound method {owner}.{fn.__func__.__name__}"
    if isinstance(fn, types.FunctionType):
        return f"function {fn.__qualname__}"
    if isinstance(fn, functools.partial):
        return leaf_text(fn)
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__


def signature(
    arguments: dict[str, Any], args: tuple, kwargs: dict, traced_scalars: bool
) -> Signature:
    """The signature of one call: `arguments` by parameter name, as bound."""
    leaves: dict[str, LeafSig] = {}
    structure: dict[str, Any] = {}
    has_numbers = False
    for name, value in arguments.items():
        found, statics = walk(value, name)
        structure[name] = jtu.tree_structure(value)
        for leaf in found:
            x, scalar = leaf.value, None
            if is_array(x):
                kind, key, text = "array", _array_key(x), _array_text(x)
            elif traced_scalars and type(x) in PYTHON_NUMBERS:
                kind, key, text, scalar = "array", _scalar_key(x), repr(x), x
            else:
                kind, key, text = "hashed", x, leaf_text(x)
                has_numbers = has_numbers or type(x) in PYTHON_NUMBERS
            sig = LeafSig(kind, key, type(x), text, leaf.field, scalar)
            leaves[leaf.path] = dataclasses.replace(
                sig, within=leaf.within, within_shape=leaf.within_shape
            )
        for static in statics:
            x = static.value
            leaves[static.path] = LeafSig(
                "static", x, type(x), leaf_text(x), static.field
            )
    flat, treedef = jtu.tree_flatten((args, kwargs))
    arrays = tuple((i, _array_key(x)) for i, x in enumerate(flat) if is_array(x))
    hashed = tuple((i, x, type(x)) for i, x in enumerate(flat) if not is_array(x))
    return Signature(leaves, structure, has_numbers, treedef, arrays, hashed)


def _array_text(x: Any) -> str:
    shape, dtype, weak = _array_key(x)
    text = short_repr(jax.ShapeDtypeStruct(shape, dtype))
    return f"weak {text}" if weak else text
