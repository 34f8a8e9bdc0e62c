"""Whether `af.filter_jit` would run one compiled program for two static leaves.

`eqx.filter_jit` hashes a non-array leaf into its cache key, so two callables share
a program only when they are equal, which for functions means identical.
`af.filter_jit` keys a callable by what it traces to (issue 20): this module is
that rule as the diagnostics apply it, so that `af.audit(tree, other)` can say
which differences `af.filter_jit` already absorbs. It reads callables and never
calls them.
"""

from __future__ import annotations

import functools
import os
import types
from typing import Any

from .._errors import short_repr

# A bound on nesting (closures of closures of partials ...): past it, not shared.
_DEPTH = 32


def equal_value(a: Any, b: Any) -> bool:
    """Identical, or of one type, hashable, and `==`: what a captured or bound
    value must be for two callables to trace alike. Arrays, lists, dicts and
    objects without value equality are compared by identity."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    try:
        hash(a), hash(b)  # unhashable (arrays, lists, dicts): identity only
        return bool(a == b)
    except Exception:
        return False


def shares_trace(a: Any, b: Any, depth: int = 0) -> bool:
    """Whether `af.filter_jit` keys the leaves `a` and `b` alike.

    True when they are equal values (`equal_value`), or: `functools.partial`s of
    functions that share by this rule, with equal `args` and `keywords`;
    functions with one code object and one globals dict, equal defaults and
    keyword defaults, and closure cells whose contents share by this rule; bound
    methods of functions that share, on equal (or identical) objects.
    """
    if equal_value(a, b):
        return True
    if type(a) is not type(b) or depth > _DEPTH:
        return False
    if isinstance(a, functools.partial):
        return (
            shares_trace(a.func, b.func, depth + 1)
            and _equal_sequences(a.args, b.args)
            and a.keywords.keys() == b.keywords.keys()
            and all(equal_value(a.keywords[k], b.keywords[k]) for k in a.keywords)
        )
    if isinstance(a, types.MethodType):
        return shares_trace(a.__func__, b.__func__, depth + 1) and equal_value(
            a.__self__, b.__self__
        )
    if isinstance(a, types.FunctionType):
        return (
            a.__code__ is b.__code__
            and a.__globals__ is b.__globals__
            and _equal_sequences(a.__defaults__ or (), b.__defaults__ or ())
            and _equal_mappings(a.__kwdefaults__ or {}, b.__kwdefaults__ or {})
            and _cells_share(a.__closure__ or (), b.__closure__ or (), depth)
        )
    return False


def _equal_sequences(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(map(equal_value, a, b))


def _equal_mappings(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(equal_value(a[k], b[k]) for k in a)


def _cells_share(a: tuple, b: tuple, depth: int) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        left, right = _contents(x), _contents(y)
        if left is _EMPTY or right is _EMPTY:  # a name not bound yet
            if left is not right:
                return False
        elif not shares_trace(left, right, depth + 1):
            return False
    return True


_EMPTY = object()


def _contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _EMPTY


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
        if not shares_trace(a.func, b.func):
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
        if not shares_trace(a.__func__, b.__func__):
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
        if not _equal_sequences(a.__defaults__ or (), b.__defaults__ or ()):
            return "different default arguments"
        if not _equal_mappings(a.__kwdefaults__ or {}, b.__kwdefaults__ or {}):
            return "different keyword-only defaults"
        names = a.__code__.co_freevars
        cells = zip(a.__closure__ or (), b.__closure__ or (), strict=True)
        for name, (x, y) in zip(names, cells, strict=True):
            left, right = _contents(x), _contents(y)
            if not shares_trace(left, right):
                return f"captured {name}: {_pair(left, right)}"
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
