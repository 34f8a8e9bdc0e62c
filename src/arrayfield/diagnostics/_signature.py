"""What the jit cache sees of one call: a signature of every argument leaf.

A leaf is either an abstract array (shape, dtype, weak type) or a value hashed into
the cache key; static fields are listed too. `explain_retraces` builds one
signature per call that traced and compares it with earlier ones (`_diff.py`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.tree_util as jtu
import numpy as np

from .._convert import canonical_dtype
from .._errors import short_repr
from .._internals import PYTHON_NUMBERS
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


def _describe_leaf(value: Any, kind: str, field: FieldRef | None) -> LeafSig:
    return LeafSig(kind, value, type(value), short_repr(value), field)


def signature(
    arguments: dict[str, Any], args: tuple, kwargs: dict, traced_scalars: bool
) -> Signature:
    leaves: dict[str, LeafSig] = {}
    structure: dict[str, Any] = {}
    has_numbers = False
    for name, value in arguments.items():
        found, statics = walk(value, name)
        structure[name] = jtu.tree_structure(value)
        for leaf in found:
            x = leaf.value
            if is_array(x):
                sig = LeafSig("array", _array_key(x), type(x), _array_text(x), None)
            elif traced_scalars and type(x) in PYTHON_NUMBERS:
                sig = LeafSig("array", _scalar_key(x), type(x), repr(x), None, x)
            else:
                sig = _describe_leaf(x, "hashed", leaf.field)
                has_numbers = has_numbers or type(x) in PYTHON_NUMBERS
            leaves[leaf.path] = sig
        for static in statics:
            leaves[static.path] = _describe_leaf(static.value, "static", static.field)
    flat, treedef = jtu.tree_flatten((args, kwargs))
    arrays = tuple((i, _array_key(x)) for i, x in enumerate(flat) if is_array(x))
    hashed = tuple((i, x, type(x)) for i, x in enumerate(flat) if not is_array(x))
    return Signature(leaves, structure, has_numbers, treedef, arrays, hashed)


def _array_text(x: Any) -> str:
    shape, dtype, weak = _array_key(x)
    text = short_repr(jax.ShapeDtypeStruct(shape, dtype))
    return f"weak {text}" if weak else text
