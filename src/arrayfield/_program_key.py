"""When two traces are the same program: a hashable key read off a traced `jax.jit`.

`af.filter_jit` traces exactly when `eqx.filter_jit` would, and then asks whether
the program that trace produced was compiled before in this process. The key
answers that from the program itself, never from the Python objects that made
it: a trace can read anything (closure cells, dicts, class attributes), so only
what it *produced* is evidence.

Two keys are equal only when lowering would see the same input:

- the jaxpr, equation by equation, with variables numbered in the order they are
  bound: each equation's primitive (by identity), its inputs, its outputs' avals
  (shape, dtype, weak type, sharding), its effects and its context;
- literals and constants by type and value (floats by their bits, so `0.0` and
  `-0.0` differ; arrays by dtype, shape and bytes, an array of more than
  `DIGEST_FROM` bytes by a 256-bit BLAKE2b digest of them, so that a key holds
  no copy of a captured array, as JAX's persistent cache keys a program by a
  SHA-256 digest of what it embeds): XLA embeds them in the
  program, and they stay embedded, since passing them as arguments instead lets
  XLA fold less and changes results in the last bit (`exp` of a captured array
  differed in 10% of its elements when measured on the CPU);
- parameters by value where they are plain data (numbers, strings, dtypes,
  tuples of them, avals, shardings, nested jaxprs, which recurse) and by
  identity otherwise, holding the object so that its id is never reused;
- the jit's own options (shardings, layouts, donation, name) and JAX's
  configuration at trace time.

One exception is proved rather than assumed: the rules that differentiate a
`custom_jvp`/`custom_vjp` function are functions created anew by each trace, and
lowering reads only the primal jaxpr of those equations
(`_jax_private.INERT_PARAMS` checks which JAX does so), so they are left out.
Anything this module cannot read makes the program its own (a key that equals
no other), which costs a compile and never a wrong result.
"""

from __future__ import annotations

import enum
import hashlib
import types
from typing import Any

import jax
import jax.extend
import numpy as np

from . import _jax_private

_CLOSED_JAXPR = _jax_private.CLOSED_JAXPR
_JAXPR = _jax_private.JAXPR
_LITERAL = jax.extend.core.Literal
_DROP_VAR = _jax_private.DROP_VAR
_PRIMITIVE = jax.extend.core.Primitive
# Python values compared by type and value (floats apart: by their bits).
_ATOMS = frozenset({bool, int, str, bytes, type(None), type(Ellipsis)})
# JAX's own data types whose `==` compares what lowering reads (avals, shardings,
# meshes, partition specs); a class outside these and the cases below compares
# by identity.
_VALUE_TYPES = _jax_private.VALUE_PARAM_TYPES
# Arrays of more bytes than this are keyed by a digest (see the module docstring).
DIGEST_FROM = 64
_INERT = _jax_private.INERT_PARAMS


class Same:
    """An object compared by identity, held so that its id stays its own."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return type(other) is Same and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


class _Unreadable(Exception):
    """Raised inside the walk where a program cannot be read; its key is unique."""


def program_key(traced: Any) -> tuple:
    """The key of a `jax.jit(...).trace(...)` result: equal for two traces exactly
    when they are the same program (see the module docstring)."""
    closed, params = _jax_private.traced_program(traced)
    return closed_key(closed, params)


def constant_keys(key: tuple, closed: Any) -> tuple:
    """The `value_key`s of `closed`'s constants, read from its `program_key`
    (`key`) where the walk made them, so large constants are not hashed twice."""
    if len(key) > 1:  # ("closed", jaxpr key, constants' keys), options, context
        return key[0][2]
    return tuple(map(value_key, closed.consts))


def closed_key(closed: Any, params: dict[str, Any]) -> tuple:
    """The key of a closed jaxpr compiled with a jit's parameters `params`."""
    return _key(_Walk(), closed, params)


def masked_key(closed: Any, params: dict[str, Any]) -> tuple[tuple, list[Embedded]]:
    """`(key, numbers)`: the key of `closed_key` with every literal and constant
    replaced by its aval, and those numbers in the order the key meets them. Two
    programs with equal masked keys differ at most in the values they embed."""
    numbers: list[Embedded] = []
    key = _key(_Walk(numbers), closed, params)
    return key, numbers if len(key) > 1 else []


def _key(walk: _Walk, closed: Any, params: dict[str, Any]) -> tuple:
    try:
        options = tuple(
            sorted(
                (name, walk.value(value))
                for name, value in params.items()
                if name != "jaxpr"
            )
        )
        return (walk.closed(closed), options, _jax_private.trace_context())
    except (_Unreadable, TypeError, ValueError):
        return (Same(closed),)  # equal to no other key


class Embedded:
    """A number a program embeds: a literal operand of an equation, or a constant
    (an array the traced function captured). `eqn` is the equation that reads a
    literal; a constant has its variable `var` instead."""

    __slots__ = ("aval", "eqn", "value", "var")

    def __init__(self, value: Any, aval: Any, eqn: Any, var: Any = None):
        self.value = value
        self.aval = aval
        self.eqn = eqn
        self.var = var


class _Walk:
    """One key's walk; nested jaxprs seen twice (a function called twice) are
    read once. With `numbers`, literals and constants are keyed by their avals
    alone and collected there (`masked_key`)."""

    __slots__ = ("eqn", "numbers", "seen")

    def __init__(self, numbers: list[Embedded] | None = None) -> None:
        self.seen: dict[int, tuple[Any, tuple]] = {}
        self.numbers = numbers
        self.eqn: Any = None  # the equation being read, for `numbers`

    def closed(self, closed: Any) -> tuple:
        found = self.seen.get(id(closed))
        if found is not None:
            return found[1]
        if self.numbers is None:
            consts = tuple(value_key(const) for const in closed.consts)
        else:
            self.numbers.extend(
                Embedded(c, v.aval, None, v)
                for c, v in zip(closed.consts, closed.jaxpr.constvars, strict=True)
            )
            consts = tuple(v.aval for v in closed.jaxpr.constvars)
        key = ("closed", self.jaxpr(closed.jaxpr), consts)
        self.seen[id(closed)] = (closed, key)  # the object keeps its id ours
        return key

    def jaxpr(self, jaxpr: Any) -> tuple:
        found = self.seen.get(id(jaxpr))
        if found is not None:
            return found[1]
        numbers: dict[Any, int] = {}

        def bind(var: Any) -> Any:
            numbers[var] = len(numbers)
            return var.aval

        def atom(x: Any) -> Any:
            if type(x) is _LITERAL:
                if self.numbers is not None:
                    self.numbers.append(Embedded(x.val, x.aval, self.eqn))
                    return ("literal", x.aval)
                return ("literal", value_key(x.val), x.aval)
            try:
                return numbers[x]
            except KeyError:  # a variable bound nowhere in this jaxpr
                raise _Unreadable from None

        head = (
            tuple(map(bind, jaxpr.constvars)),
            tuple(map(bind, jaxpr.invars)),
        )
        equations = []
        outer = self.eqn
        for eqn in jaxpr.eqns:
            self.eqn = eqn
            primitive = eqn.primitive
            inputs = tuple(map(atom, eqn.invars))
            inert = _INERT.get(primitive.name, ())
            params = tuple(
                sorted(
                    (name, None if name in inert else self.value(value))
                    for name, value in eqn.params.items()
                )
            )
            outputs = tuple(
                ("dropped", v.aval) if type(v) is _DROP_VAR else bind(v)
                for v in eqn.outvars
            )
            equations.append(
                (
                    Same(primitive),
                    inputs,
                    params,
                    outputs,
                    frozenset(eqn.effects),
                    Same(eqn.ctx),  # interned by JAX: equal contexts are one object
                )
            )
        self.eqn = outer
        key = (
            head,
            tuple(equations),
            tuple(map(atom, jaxpr.outvars)),
            frozenset(jaxpr.effects),
        )
        self.seen[id(jaxpr)] = (jaxpr, key)
        return key

    def value(self, x: Any) -> Any:
        """A parameter's key: by value where it is data, else by identity."""
        cls = type(x)
        if cls in _ATOMS or cls is float or cls is complex:
            return value_key(x)
        if cls is _CLOSED_JAXPR:
            return self.closed(x)
        if cls is _JAXPR:
            return self.jaxpr(x)
        if isinstance(x, (tuple, list)):  # NamedTuples of dimension numbers too
            return (cls, tuple(map(self.value, x)))
        if cls is np.dtype or isinstance(x, (np.generic, np.ndarray)):
            return value_key(x)
        if cls in _VALUE_TYPES:
            return (cls, x)
        if isinstance(x, (enum.Enum, _PRIMITIVE, types.FunctionType)):
            return Same(x)  # enum members and primitives are singletons
        return Same(x)


def value_key(x: Any) -> Any:
    """A literal's or a constant's key: its type and exact value."""
    cls = type(x)
    if cls in _ATOMS:
        return (cls, x)
    if cls is float:
        return (cls, x.hex())  # by bits: -0.0 and 0.0 differ, nan equals nan
    if cls is complex:
        return (cls, x.real.hex(), x.imag.hex())
    if cls is np.dtype:
        return (cls, x)
    try:
        array = np.asarray(x)
    except Exception:  # an array of PRNG keys, say: only itself is itself
        return Same(x)
    if array.dtype == object:
        return Same(x)
    if array.nbytes > DIGEST_FROM:
        data = np.ascontiguousarray(array).data
        return (cls, array.dtype.str, array.shape, hashlib.blake2b(data).digest())
    return (cls, array.dtype.str, array.shape, array.tobytes())
