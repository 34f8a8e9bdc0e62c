"""Programs that differ only in integer offsets: one generalised program for all.

A scene renders each source in a box of fixed shape and adds it into the frame
at a Python-int origin (`frame.at[oy:oy + h, ox:ox + w].add(box)`). Every field
puts its sources elsewhere, so every field traces to its own program, and the
programs differ in nothing but those integers: the starts of `slice`
equations, and integer literals that only ever become indices (the start
operands of `dynamic_slice`/`dynamic_update_slice`, the index operand of a
`gather` or `scatter`, directly or through the `broadcast_in_dim`/`concatenate`
that `jnp` builds an index vector with).

Such a program is *generalised* here (`af.filter_jit(share_offsets=True)`): each
of those integers that differs between two fields becomes an input, a `slice`
becomes a `dynamic_slice` of the same sizes, a `pad` a `dynamic_update_slice`
or `dynamic_slice`, and everything else is left as it is. The generalised
program run with one field's integers computes what that field's program
computes, operation for operation:

- a literal made an input is bound to the same value by the same primitive;
- `dynamic_slice` at start `s` with sizes `l - s` reads exactly what
  `slice(start=s, limit=l)` reads whenever `s` is in bounds, and it is: JAX
  checked each field's own slice against its operand's shape when it traced
  (and a pad that only grows or only crops is a placement of the same kind).
  Only unit strides are generalised (a strided slice stays specialised).

That is the same computation, not the same program: XLA optimises around
constant starts (folds and fuses a placement into what reads it) in ways it
cannot around runtime ones, and a reduction fused differently sums in another
order. Results then differ in the last bits in some elements of some programs
(tests/test_offsets.py measures how often), so this sharing is an option,
never the default. Shapes never generalise: they are
part of every aval, so a box of another size is another program. Only the
outermost jaxpr is read; integers inside a nested jaxpr (a `scan` body, a
`cond` branch, `jnp.pad`'s own jit) keep a program specialised, as do programs
that call back or carry effects, and jits with explicit shardings or layouts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.core
import jax.extend.core as jcore
import numpy as np

from . import _internals
from ._program_key import closed_key

_LITERAL = jcore.Literal
_DROP_VAR = _internals.DROP_VAR
_SLICE = jax.lax.slice_p
_PAD = jax.lax.pad_p
# Equations through which an integer stays an index: they only move or
# re-type integers (`jnp` builds `x.at[a:b, c:d]`'s start vector with them).
_INDEX_PLUMBING = frozenset(
    {"broadcast_in_dim", "concatenate", "reshape", "squeeze", "expand_dims"}
)
_CONVERT = "convert_element_type"
_INT32 = jax.core.ShapedArray((), np.dtype(np.int32))  # pyright: ignore[reportAttributeAccessIssue]


def _index_operands(eqn: Any) -> range:
    """The positions of an equation's operands that are read only as indices."""
    name = eqn.primitive.name
    if name == "dynamic_slice":
        return range(1, len(eqn.invars))
    if name == "dynamic_update_slice":
        return range(2, len(eqn.invars))
    if name == "gather" or name.startswith("scatter"):
        return range(1, 2)
    return range(0)


def _is_integer(aval: Any) -> bool:
    return np.issubdtype(getattr(aval, "dtype", np.float32), np.integer)


def _plumbs_indices(eqn: Any) -> bool:
    """Whether an equation only moves integers (the kinds in `_INDEX_PLUMBING`,
    and `convert_element_type` from one integer type to another)."""
    name = eqn.primitive.name
    if name not in _INDEX_PLUMBING and name != _CONVERT:
        return False
    atoms = [*eqn.invars, *eqn.outvars]
    return all(_is_integer(x.aval) for x in atoms)


class Site(NamedTuple):
    """Where offsets sit in a jaxpr: an integer literal (`operand` its position
    among the equation's inputs) or the starts of a placing equation, a slice
    or a pad (`operand` None; see `_placed`)."""

    eqn: int
    operand: int | None


def sites(jaxpr: Any) -> tuple[Site, ...]:
    """The offsets of a jaxpr's outermost equations, in order."""
    eqns = jaxpr.eqns
    uses: dict[Any, list[tuple[int, int]]] = {}
    for i, eqn in enumerate(eqns):
        for position, x in enumerate(eqn.invars):
            if type(x) is not _LITERAL:
                uses.setdefault(x, []).append((i, position))
    outputs = {x for x in jaxpr.outvars if type(x) is not _LITERAL}
    # Whether each plumbing equation's outputs are read as indices and nothing
    # else: from the last equation back, so that every use is decided first.
    index_only: dict[int, bool] = {}

    def read_as_index(use: tuple[int, int]) -> bool:
        i, position = use
        return position in _index_operands(eqns[i]) or index_only.get(i, False)

    for i in reversed(range(len(eqns))):
        eqn = eqns[i]
        if _plumbs_indices(eqn):
            index_only[i] = all(
                type(v) is _DROP_VAR
                or (v not in outputs and all(map(read_as_index, uses.get(v, ()))))
                for v in eqn.outvars
            )
    found = []
    for i, eqn in enumerate(eqns):
        indices = _index_operands(eqn)
        for position, x in enumerate(eqn.invars):
            if (
                type(x) is _LITERAL
                and getattr(x.aval, "shape", None) == ()
                and _is_integer(x.aval)
                and (position in indices or index_only.get(i, False))
            ):
                found.append(Site(i, position))
        if _placed(eqn):
            found.append(Site(i, None))
    return tuple(found)


def _placed(eqn: Any) -> bool:
    """Whether an equation places a block at starts given as parameters, as a
    `dynamic_slice` or `dynamic_update_slice` would: a `slice` with unit
    strides, or a `pad` without interior padding that only grows or only crops
    (`_pad_kind`)."""
    if eqn.primitive is _SLICE:
        return all(stride == 1 for stride in eqn.params["strides"] or ())
    if eqn.primitive is _PAD:
        return _pad_kind(eqn) is not None
    return False


def _pad_kind(eqn: Any) -> str | None:
    """ "grow" for a pad that only adds (`lax.pad`; the gradient of a slice),
    "crop" for one that only removes (the gradient of a growing pad), None for
    any other pad."""
    config = eqn.params["padding_config"]
    if any(interior != 0 for _, _, interior in config):
        return None
    if all(low >= 0 and high >= 0 for low, high, _ in config):
        return "grow"
    if all(low <= 0 and high <= 0 for low, high, _ in config):
        return "crop"
    return None


def _starts(eqn: Any) -> tuple[int, ...]:
    """A placing equation's starts: a slice's; where a pad puts its operand in
    its output ("grow") or where it takes its output from its operand ("crop")."""
    if eqn.primitive is _SLICE:
        return tuple(eqn.params["start_indices"])
    return tuple(abs(int(low)) for low, _, _ in eqn.params["padding_config"])


def offsets(jaxpr: Any, at: Sequence[Site]) -> tuple[int, ...]:
    """The integers at `at`: one per literal, one per dimension of a placing
    equation."""
    values: list[int] = []
    for site in at:
        eqn = jaxpr.eqns[site.eqn]
        if site.operand is None:
            values.extend(_starts(eqn))
        else:
            values.append(int(eqn.invars[site.operand].val))
    return tuple(values)


def _dynamic(eqn: Any, starts: list[Any]) -> list[Any]:
    """The equations that do what a placing equation does (`_placed`) at
    `starts` given as operands: `slice` and a cropping `pad` become a
    `dynamic_slice` of the same sizes, a growing `pad` a `dynamic_update_slice`
    into a block of the padding value.
    Traced from `jax.lax` itself, then wired to the equation's own variables."""
    operand = eqn.invars[0]
    shape = eqn.outvars[0].aval.shape
    placed: Any
    if eqn.primitive is _SLICE or _pad_kind(eqn) == "crop":

        def cut(x: Any, *starts: Any) -> Any:
            return jax.lax.dynamic_slice(x, starts, shape)

        placed, inputs = cut, [operand, *starts]
    else:
        dtype = operand.aval.dtype

        def paste(x: Any, fill: Any, *starts: Any) -> Any:
            block = jax.lax.broadcast_in_dim(fill.astype(dtype), shape, ())
            return jax.lax.dynamic_update_slice(block, x, starts)

        fill = eqn.invars[1]
        if type(fill) is _LITERAL:  # strongly typed, as the operand it pads
            fill = _LITERAL(fill.val, fill.aval.update(weak_type=False))
        placed, inputs = paste, [operand, fill, *starts]
    traced = jax.make_jaxpr(placed)(
        *(jax.ShapeDtypeStruct(x.aval.shape, x.aval.dtype) for x in inputs)
    ).jaxpr
    if not traced.eqns or traced.outvars[0] in traced.invars:
        raise ValueError("jax.lax placed the block without an equation")
    renamed = dict(zip(traced.invars, inputs, strict=True))
    renamed[traced.outvars[0]] = eqn.outvars[0]

    def wired(x: Any) -> Any:
        return x if type(x) is _LITERAL else renamed.get(x, x)

    return [
        new.replace(
            invars=[wired(x) for x in new.invars],
            outvars=[wired(x) for x in new.outvars],
            ctx=eqn.ctx,
            source_info=eqn.source_info,
        )
        for new in traced.eqns
    ]


def dtypes(jaxpr: Any, at: Sequence[Site]) -> tuple[np.dtype, ...]:
    """The dtype of each offset, in `offsets` order: a literal's own, int32 for
    a slice's starts (what `dynamic_slice` is given for them)."""
    found: list[Any] = []
    for site in at:
        eqn = jaxpr.eqns[site.eqn]
        if site.operand is None:
            found.extend([_INT32.dtype] * len(_starts(eqn)))
        else:
            found.append(eqn.invars[site.operand].aval.dtype)
    return tuple(found)


def blanked(closed: Any, at: Sequence[Site]) -> Any:
    """`closed` with every offset at `at` blanked (literals made inputs, a
    placing equation's starts erased): two programs give equal keys for it
    (`_program_key.closed_key`) exactly when they differ only in offsets. Only
    keyed, never run."""
    jaxpr = closed.jaxpr
    eqns = list(jaxpr.eqns)
    added = []
    for site in at:
        eqn = eqns[site.eqn]
        if site.operand is None:
            params = dict(eqn.params)
            if eqn.primitive is _SLICE:
                params["start_indices"] = params["limit_indices"] = None
            else:  # what a pad adds before and after: their sum is in the shape
                params["padding_config"] = _pad_kind(eqn)
            eqns[site.eqn] = eqn.replace(params=params)
        else:
            invars = list(eqn.invars)
            var = _internals.new_var(invars[site.operand].aval)
            invars[site.operand] = var
            added.append(var)
            eqns[site.eqn] = eqn.replace(invars=invars)
    new = jaxpr.replace(invars=[*jaxpr.invars, *added], eqns=eqns)
    return jcore.ClosedJaxpr(new, closed.consts)


def family_key(closed: Any, at: Sequence[Site], params: dict[str, Any]) -> tuple:
    """The key of `closed` (compiled with the jit parameters `params`) with its
    offsets at `at` blanked: equal for two programs exactly when they differ
    only in offsets."""
    return closed_key(blanked(closed, at), params)


def generalised(closed: Any, at: Sequence[Site], inputs: Sequence[bool]) -> Any:
    """`closed` with the offsets at `at` for which `inputs` is true (one flag
    per offset, in `offsets` order) made inputs, strongly typed, after its own
    inputs (type-checked by JAX: one it would not accept raises)."""
    jaxpr = closed.jaxpr
    eqns = list(jaxpr.eqns)
    flags = iter(inputs)
    added: list[Any] = []

    def offset_input(value: int, aval: Any) -> Any:
        if not next(flags):
            return _LITERAL(value, aval)
        var = _internals.new_var(aval.update(weak_type=False))
        added.append(var)
        return var

    spliced: dict[int, list[Any]] = {}
    for site in at:
        eqn = eqns[site.eqn]
        if site.operand is None:
            starts = [offset_input(s, _INT32) for s in _starts(eqn)]
            if not all(type(x) is _LITERAL for x in starts):  # else as it was
                spliced[site.eqn] = _dynamic(eqn, starts)
        else:
            literal = eqn.invars[site.operand]
            invars = list(eqn.invars)
            invars[site.operand] = offset_input(int(literal.val), literal.aval)
            eqns[site.eqn] = eqn.replace(invars=invars)
    eqns = [e for i, eqn in enumerate(eqns) for e in spliced.get(i, (eqn,))]
    debug_info = jaxpr.debug_info
    if debug_info is not None and debug_info.arg_names is not None:
        names = (*debug_info.arg_names, *("offset",) * len(added))
        debug_info = debug_info._replace(arg_names=names)
    new = jaxpr.replace(
        invars=[*jaxpr.invars, *added], eqns=eqns, debug_info=debug_info
    )
    _internals.check_jaxpr(new)
    return jcore.ClosedJaxpr(new, closed.consts)
