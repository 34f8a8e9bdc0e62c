"""Whether `af.filter_jit` would run one compiled program for two static leaves.

`eqx.filter_jit` hashes a non-array leaf into its cache key, so two callables share
a program only when they are equal, which for functions means identical.
`af.filter_jit` keys a callable by what it traces to (issue 20): this module asks
its rule (`_callable_key`) about two leaves, so that `af.audit(tree, other)` and
retrace warnings say which differences `af.filter_jit` already absorbs, and adds
what the diagnostics need on top: a few words on why two callables are shared,
or on what differs. It reads callables and never calls them. Globals are read as
they are now, for both leaves. `tests/test_audit.py` holds the rule against
`af.filter_jit`'s real trace counts.
"""

from __future__ import annotations

import functools
import os
import types
from typing import Any

from .. import _callable_key, _internals
from .._errors import short_repr

_JIT = _internals.JIT_FUNCTION
equal_value = _callable_key.same_value


def shares_trace(a: Any, b: Any) -> bool:
    """Whether `af.filter_jit` runs one program for static leaves `a` and `b`: by
    its callable keys where this equinox and JAX support them, else by `==`."""
    if _callable_key.SUPPORTED:
        return _callable_key.same_static(a, b)
    try:
        return a is b or bool(a == b)
    except Exception:
        return False


def comparable(a: Any, b: Any) -> bool:
    """Whether `shares_trace` looks inside these callables (partials, functions,
    bound methods, `jax.jit` wrappers of one type); others are compared by `==`."""
    return type(a) is type(b) and _callable_key.is_compared_by_trace(a)


_EMPTY = object()  # the contents of an empty closure cell (a name not yet bound)


def _contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY


def _same_keys_and_values(a: dict | None, b: dict | None) -> bool:
    a, b = a or {}, b or {}
    return a.keys() == b.keys() and all(equal_value(a[k], b[k]) for k in a)


def sameness(a: Any, b: Any) -> str:
    """Why `shares_trace(a, b)` holds, in a few words."""
    if isinstance(a, functools.partial):
        return "partials of one function with equal arguments"
    if isinstance(a, types.MethodType):
        return "one method, bound to equal objects"
    if type(a) is _JIT:
        return "jax.jit wrappers of equal functions with the same options"
    if isinstance(a, types.FunctionType):
        if a.__closure__:
            return "one code object with equal captured values"
        return "one code object, capturing nothing"
    return "equal values"


def difference(a: Any, b: Any) -> str:
    """What makes `shares_trace(a, b)` false, in a few words with the values."""
    if type(a) is not type(b):
        return f"a {type(a).__name__}, then a {type(b).__name__}"
    if isinstance(a, functools.partial):
        if not equal_value(a.func, b.func):
            return f"partials of different functions: {difference(a.func, b.func)}"
        if len(a.args) != len(b.args):
            return "partials with different numbers of arguments"
        for i, (x, y) in enumerate(zip(a.args, b.args, strict=True)):
            if not equal_value(x, y):
                return f"argument {i} of the partial: {_pair(x, y)}"
        for key in sorted(a.keywords.keys() | b.keywords.keys()):
            x, y = a.keywords.get(key, _EMPTY), b.keywords.get(key, _EMPTY)
            if not equal_value(x, y):
                return f"keyword {key} of the partial: {_pair(x, y)}"
    if type(a) is _JIT:
        parts_a, parts_b = _internals.jit_parts(a), _internals.jit_parts(b)
        if parts_a is None or parts_b is None:
            return "jax.jit wrappers whose parts this JAX version hides"
        if not equal_value(parts_a[0], parts_b[0]):
            inner = difference(parts_a[0], parts_b[0])
            return f"jax.jit of different functions: {inner}"
        return "jax.jit wrappers with different options"
    if isinstance(a, types.MethodType):
        if not equal_value(a.__func__, b.__func__):
            return "different methods"
        self_type = type(a.__self__)
        if self_type is type(b.__self__) and self_type.__eq__ is object.__eq__:
            return (
                f"bound to two {self_type.__qualname__} objects, and "
                f"{self_type.__qualname__} compares by identity"
            )
        return f"bound to unequal objects: {_pair(a.__self__, b.__self__)}"
    if isinstance(a, types.FunctionType):
        if a.__code__ is not b.__code__:
            return f"different code: {_code(a)} and {_code(b)}"
        if a.__globals__ is not b.__globals__:
            return "one code object, run in different module globals"
        if not equal_value(a.__defaults__, b.__defaults__):
            return "different default arguments"
        if not _same_keys_and_values(a.__kwdefaults__, b.__kwdefaults__):
            return "different keyword-only defaults"
        names = a.__code__.co_freevars
        cells = zip(a.__closure__ or (), b.__closure__ or (), strict=True)
        for name, (x, y) in zip(names, cells, strict=True):
            left, right = _contents(x), _contents(y)
            if not equal_value(left, right):
                return f"captured {name}: {_pair(left, right)}"
        return "different names or function attributes"
    if isinstance(a, functools.partial):
        return "different attributes on the partials"
    return "different objects, compared by identity"


def _pair(x: Any, y: Any) -> str:
    if x is _EMPTY or y is _EMPTY:
        return "set in one, not in the other"
    left, right = short_repr(x, 60), short_repr(y, 60)
    if left == right:
        return f"two {type(x).__name__} objects that are not equal ({left})"
    return f"{left} -> {right}"


def _code(fn: Any) -> str:
    code = fn.__code__
    filename = os.path.basename(code.co_filename)
    return f"{fn.__qualname__} ({filename}:{code.co_firstlineno})"
