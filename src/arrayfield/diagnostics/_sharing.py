"""Whether `af.filter_jit` would run one compiled program for two static leaves.

`eqx.filter_jit` hashes a non-array leaf into its cache key, so two callables share
a program only when they are equal, which for functions means identical.
`af.filter_jit` keys a callable by what it traces to (issue 20): this module is
that rule as the diagnostics apply it, so that `af.audit(tree, other)` can say
which differences `af.filter_jit` already absorbs. It reads callables and never
calls them. `jax.jit` wrappers are not looked into here (their parts are private
to JAX): two of them count as different. `tests/test_audit.py` holds the rule
against `af.filter_jit`'s real trace counts.
"""

from __future__ import annotations

import functools
import math
import os
import types
from typing import Any

import numpy as np

from .._errors import short_repr

# A bound on nesting (closures of closures of partials ...): past it, not shared.
_DEPTH = 64
# Exact types: a subclass (of functools.partial, say) may call differently.
_CALLABLE_KINDS = frozenset({functools.partial, types.MethodType, types.FunctionType})
_ATOMS = frozenset({int, bool, str, bytes, type(None), type(Ellipsis)})


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an array's ==, or one that raises
        return False


def equal_value(a: Any, b: Any, _active: set | None = None, depth: int = 0) -> bool:
    """Equal as a captured, bound or default value must be for two callables to
    trace alike: identical, or of one type and `==` (floats also by sign, NumPy
    scalars by their bytes), tuples element by element, callables by
    `shares_trace`'s rule. Arrays, lists, dicts and objects without value
    equality (unhashable, or `==` by identity) compare by identity."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b) or depth > _DEPTH:
        return False
    if t in _ATOMS:
        return a == b
    if t is float:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if t is complex:
        return equal_value(a.real, b.real) and equal_value(a.imag, b.imag)
    if t is tuple:
        return len(a) == len(b) and all(
            equal_value(x, y, _active, depth + 1) for x, y in zip(a, b, strict=True)
        )
    if t in _CALLABLE_KINDS:
        return _same_callable(a, b, set() if _active is None else _active, depth)
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    return _hashable(a) and _hashable(b) and _equal(a, b)


def _hashable(x: Any) -> bool:
    try:
        hash(x)
    except Exception:  # arrays, lists, dicts, sets: compared by identity only
        return False
    return True


def comparable(a: Any, b: Any) -> bool:
    """Whether `shares_trace` looks inside these callables (partials, functions,
    bound methods of one type); other callables are compared by `==`."""
    return type(a) is type(b) and type(a) in _CALLABLE_KINDS


def shares_trace(a: Any, b: Any) -> bool:
    """Whether `af.filter_jit` keys the leaves (or static fields) `a` and `b` alike.

    As `eqx.filter_jit` (`==`) for values; for callables, what they trace to:
    `functools.partial`s of equal functions with equal `args`, `keywords` and
    attributes; functions with one code object, one globals dict, one name, equal
    defaults, keyword defaults, attributes and closure cell contents; bound
    methods of equal functions on equal objects (all by `equal_value`).
    Tuples and lists element by element.
    """
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        if t in _CALLABLE_KINDS or type(b) in _CALLABLE_KINDS:
            return False
        return _equal(a, b)
    if t is tuple or t is list:
        return len(a) == len(b) and all(map(shares_trace, a, b))
    if t in _CALLABLE_KINDS:
        return _same_callable(a, b, set(), 0)
    return _equal(a, b)


def _same_callable(a: Any, b: Any, active: set, depth: int) -> bool:
    pair = (id(a), id(b))
    if pair in active:
        return True  # compared further up already: equal if everything else is
    if depth > _DEPTH:
        return False
    active.add(pair)
    try:
        return _compare_callables(a, b, active, depth + 1)
    finally:
        active.discard(pair)


def _compare_callables(a: Any, b: Any, active: set, depth: int) -> bool:
    def value(x: Any, y: Any) -> bool:
        return equal_value(x, y, active, depth)

    def mapping(x: dict | None, y: dict | None) -> bool:
        if not x or not y:
            return not x and not y
        return x.keys() == y.keys() and all(value(x[k], y[k]) for k in x)

    if type(a) is functools.partial:
        return (
            value(a.func, b.func)
            and value(a.args, b.args)
            and mapping(a.keywords, b.keywords)
            and mapping(a.__dict__, b.__dict__)
        )
    if type(a) is types.MethodType:
        return value(a.__func__, b.__func__) and value(a.__self__, b.__self__)
    cells_a, cells_b = a.__closure__ or (), b.__closure__ or ()
    return (
        a.__code__ is b.__code__
        and a.__globals__ is b.__globals__
        and a.__name__ == b.__name__
        and a.__qualname__ == b.__qualname__
        and value(a.__defaults__, b.__defaults__)
        and mapping(a.__kwdefaults__, b.__kwdefaults__)
        and mapping(a.__dict__, b.__dict__)
        and len(cells_a) == len(cells_b)
        and all(
            value(_contents(x), _contents(y))
            for x, y in zip(cells_a, cells_b, strict=True)
        )
    )


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
