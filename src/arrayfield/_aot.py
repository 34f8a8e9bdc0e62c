"""Ahead of time: `af.filter_jit(f).trace(...)` and `.lower(...).compile()`,
the compiled step checked at every call.

Equinox's compiled step runs whatever it is called with, as long as the arrays
have the avals it was compiled for: the static part of the call (static fields,
Python numbers, the tree structure) was baked into the program when it was
lowered, and a call with another static part silently gets the program of the
first, another field's answer. `Compiled` here compares each call's static part
with the one it was lowered for and raises, naming the first argument leaf or
static field that differs. Arrays are JAX's to check (shapes and dtypes).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import equinox as eqx
import jax
import jax.tree_util as jtu
import numpy as np

from ._errors import short_repr


def static_part(arguments: Any) -> Any:
    """What a call bakes into its program: the tree structure of its bound
    arguments (`by_name`) and each non-array leaf, with its type (`1` and `1.0`
    compare equal, but trace to other dtypes)."""
    leaves, treedef = jtu.tree_flatten(arguments)
    return treedef, tuple(None if eqx.is_array(x) else (type(x), x) for x in leaves)


def by_name(signature: inspect.Signature | None, args: tuple, kwargs: dict) -> dict:
    """The call's arguments by parameter name, as the function sees them."""
    if signature is not None:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            pass
        else:
            return dict(bound.arguments)
    return {**{f"args[{i}]": a for i, a in enumerate(args)}, **kwargs}


def specs_as_arrays(tree: Any, where: str) -> Any:
    """`tree` with each `jax.ShapeDtypeStruct` (what `jax.eval_shape` and
    `eqx.filter_eval_shape` return) as a NumPy array of its shape and dtype
    that holds one element (zero strides): equinox traces NumPy arrays, and
    lowering reads only their shape and dtype, so nothing of the spec's size
    is allocated. A spec with a sharding or a weak type has no such array: an
    error, where equinox would take it for a static value."""

    def array(x: Any) -> Any:
        if not isinstance(x, jax.ShapeDtypeStruct):
            return x
        if getattr(x, "sharding", None) is not None or x.weak_type:
            raise TypeError(
                f"{where}: {x} has a sharding or a weak type, which a lowering "
                "from a spec cannot carry here; pass an array placed (or "
                "typed) as the calls will be"
            )
        return np.broadcast_to(np.zeros((), x.dtype), x.shape)

    return jtu.tree_map(array, tree)


class Traced:
    """`af.filter_jit(f).trace(...)`: the function's program for these
    arguments, as `jax.jit(f).trace(...)` gives one. `.jaxpr` takes the call's
    arrays in the order `jax.tree_util.tree_leaves` meets them (the arrays the
    function holds are its constants), as `eqx.filter_make_jaxpr` writes it;
    `.out_info` is the output with a `jax.ShapeDtypeStruct` where each array
    goes; `.lower()` lowers the call as the wrapper's `.lower(...)` does."""

    def __init__(self, wrapper: Any, args: tuple, kwargs: dict):
        jaxpr, arrays, others = eqx.filter_make_jaxpr(wrapper.__wrapped__)(
            *args, **kwargs
        )
        self.jaxpr = jaxpr
        self.out_info = eqx.combine(arrays, others)
        self._call = (wrapper, args, kwargs)

    def lower(self) -> Lowered:
        wrapper, args, kwargs = self._call
        return wrapper.lower(*args, **kwargs)


class Lowered:
    """`af.filter_jit(f).lower(...)`: equinox's lowered program, whose
    `.compile()` checks the static part of each call."""

    def __init__(self, lowered: Any, signature: Any, args: tuple, kwargs: dict):
        self._lowered = lowered
        self._signature = signature
        self._arguments = by_name(signature, args, kwargs)
        self._static = static_part(self._arguments)

    def as_text(self) -> str:
        return self._lowered.as_text()

    def compile(self, /, compiler_options: dict[str, str | bool] | None = None) -> Any:
        compiled = (  # equinox 0.12's compile() takes no options
            self._lowered.compile()
            if compiler_options is None
            else self._lowered.compile(compiler_options=compiler_options)
        )
        return Compiled(compiled, self._signature, self._arguments, self._static)

    def __getattr__(self, name: str) -> Any:  # equinox's own attributes
        return getattr(self._lowered, name)


class Compiled:
    """The compiled step: runs only for calls whose static part is the one it
    was compiled for, and raises otherwise, naming what differs."""

    def __init__(self, compiled: Any, signature: Any, arguments: dict, static: Any):
        self._compiled = compiled
        self._signature = signature
        self._arguments = arguments
        self._static = static

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        arguments = by_name(self._signature, args, kwargs)
        what = difference(self._arguments, self._static, arguments)
        if what is not None:
            raise TypeError(
                "this compiled af.filter_jit step was lowered for other static "
                f"values: {what}. {BAKED_IN} Lower and compile it again for these "
                "arguments, or call the af.filter_jit wrapper, which compiles "
                "for each."
            )
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # cost_analysis, as_text, ...
        return getattr(self._compiled, name)


BAKED_IN = (
    "Static fields, Python numbers and the tree structure are part of the "
    "program, so running it would return the answer for the values it was "
    "made for."
)


def difference(expected: dict, static: Any, arguments: dict) -> str | None:
    """None where `arguments` have the static part `static` of `expected`'s
    (`static_part(expected)`), else the first difference, said."""
    if same(static_part(arguments), static):
        return None
    return first_difference(expected, arguments, "") or (
        "the arguments' structure differs from the one it was made for"
    )


def same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an `==` that raises or gives an array: not provably same
        return False


def first_difference(old: Any, new: Any, path: str) -> str | None:
    """The first place, in the order the fields are declared, where two calls'
    arguments differ in something other than an array's values, said as
    "where is new where it was old"."""
    if eqx.is_array(old) and eqx.is_array(new):
        return None  # avals: JAX's own check says which
    if isinstance(old, dict) and isinstance(new, dict) and list(old) != list(new):
        if not path:  # the call's own arguments: which were given
            return (
                f"the arguments given are {', '.join(new) or 'none'} where they were "
                f"{', '.join(old) or 'none'} (a default left out and the same value "
                "given are two calls)"
            )
        return f"{path} has keys {list(new)} where it had {list(old)}"
    if type(old) is not type(new):
        return _said(path or "the arguments", old, new)
    if isinstance(old, dict):
        for key in old:
            name = key if not path else f"{path}[{key!r}]"
            found = first_difference(old[key], new[key], name)
            if found is not None:
                return found
        return None
    if isinstance(old, list | tuple):
        if len(old) != len(new):
            return f"{path} has {len(new)} elements where it had {len(old)}"
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    if dataclasses.is_dataclass(old) and isinstance(old, eqx.Module):
        for field in dataclasses.fields(old):
            a, b = getattr(old, field.name, None), getattr(new, field.name, None)
            found = first_difference(a, b, f"{path}.{field.name}")
            if found is not None:
                return found
        return None
    leaves_old, tree_old = jtu.tree_flatten(old)
    leaves_new, tree_new = jtu.tree_flatten(new)
    if tree_old != tree_new or (leaves_old == [old] and not same(old, new)):
        return _said(path, old, new)
    if leaves_old != [old]:  # another pytree node: its children
        for i, (a, b) in enumerate(zip(leaves_old, leaves_new, strict=True)):
            found = first_difference(a, b, f"{path}<leaf {i}>")
            if found is not None:
                return found
    return None


def _said(path: str, old: Any, new: Any) -> str:
    return f"{path} is {short_repr(new, 80)} where it was {short_repr(old, 80)}"
