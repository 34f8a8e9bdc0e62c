"""How a generalised program moves a block of an array at starts given at run
time (`_numbers`): the equations that replace a slice or pad whose starts were
lifted (`dynamic`), and a scatter or gather that writes or reads one block at a
start vector built from scalars (`windows`, `moved`), traced from `jax.lax` and
wired into the jaxpr (`traced_as`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.extend.core as jcore
import numpy as np

from . import _jax_private

_LITERAL = jcore.Literal
_SLICE = jax.lax.slice_p
_SCATTER_ADD = jax.lax.scatter_add_p
_SCATTER = jax.lax.scatter_p
_GATHER = jax.lax.gather_p
_BROADCAST = jax.lax.broadcast_in_dim_p
_CONCATENATE = jax.lax.concatenate_p
_DYNAMIC_SLICE = jax.lax.dynamic_slice_p
_DYNAMIC_UPDATE_SLICE = jax.lax.dynamic_update_slice_p


def pad_kind(eqn: Any) -> str | None:
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


def dynamic(eqn: Any, starts: list[Any]) -> list[Any]:
    """The equations that do what a placing equation does (a unit-stride slice,
    a pad that only grows or only crops: `_numbers`) at `starts` given as
    operands: a `slice` and a cropping `pad` become a `dynamic_slice` of the
    same sizes, a growing `pad` a `dynamic_update_slice` into a block of the
    padding value."""
    operand = eqn.invars[0]
    shape = eqn.outvars[0].aval.shape
    placed: Any
    if eqn.primitive is _SLICE or pad_kind(eqn) == "crop":

        def cut(x: Any, *starts: Any) -> Any:
            # The primitive: `lax.dynamic_slice` would also wrap negative
            # starts, which a slice's never are.
            return _DYNAMIC_SLICE.bind(x, *starts, slice_sizes=shape)

        placed, inputs = cut, [operand, *starts]
    else:
        dtype = operand.aval.dtype

        def paste(x: Any, fill: Any, *starts: Any) -> Any:
            block = jax.lax.broadcast_in_dim(fill.astype(dtype), shape, ())
            return _DYNAMIC_UPDATE_SLICE.bind(block, x, *starts)

        fill = eqn.invars[1]
        if type(fill) is _LITERAL:  # strongly typed, as the operand it pads
            fill = _jax_private.literal(
                fill.val, _jax_private.strongly_typed(fill.aval)
            )
        placed, inputs = paste, [operand, fill, *starts]
    return traced_as(placed, inputs, eqn.outvars[0], eqn)


def traced_as(fn: Any, inputs: list[Any], output: Any, eqn: Any) -> list[Any]:
    """The equations of `output = fn(*inputs)` on jaxpr variables (or literals),
    traced from `jax.lax` itself, wired to those variables and placed where
    `eqn` is (its context and source lines)."""
    traced = jax.make_jaxpr(fn)(
        *(jax.ShapeDtypeStruct(x.aval.shape, x.aval.dtype) for x in inputs)
    ).jaxpr
    if not traced.eqns or traced.outvars[0] in traced.invars:
        raise ValueError(f"jax.lax gave no equation for {fn!r}")
    renamed: dict[Any, Any] = dict(zip(traced.invars, inputs, strict=True))
    renamed[traced.outvars[0]] = output

    def wired(x: Any) -> Any:
        return x if type(x) is _LITERAL else renamed.get(x, x)

    return [
        _jax_private.replaced(
            new,
            invars=[wired(x) for x in new.invars],
            outvars=[wired(x) for x in new.outvars],
            ctx=eqn.ctx,
            source_info=eqn.source_info,
        )
        for new in traced.eqns
    ]


# A block moved by a scatter or gather at a start vector built from scalars:
# `jnp` writes `frame.at[:, oy:oy + h, ox:ox + w].add(box)` as a `scatter-add`
# at `concatenate(broadcast_in_dim(oy), broadcast_in_dim(ox))`, and its gradient
# reads the block back with a `gather`. With literal starts XLA folds the
# bounds check such a scatter or gather makes (a block that does not fit is
# dropped, or filled); with starts given at run time it computes the check and
# masks the block on every call. A block that lies within its array is moved
# exactly as a `dynamic_slice` or `dynamic_update_slice` at the same starts
# moves it (they clamp a start only where the block would not fit), so in a
# generalised program such a block is moved by those; every program of the
# family has its blocks inside alike (`_numbers.family_key`), so none that would be
# dropped or clamped runs there.


def windows(jaxpr: Any) -> list[tuple[int, bool]]:
    """`(equation, inside)` for each scatter or gather of `jaxpr` that moves one
    block at a start vector built from literal scalars (`_block`, `_scalars`):
    whether the block lies within its array at those starts."""
    defined = {v: i for i, eqn in enumerate(jaxpr.eqns) for v in eqn.outvars}
    found = []
    for i, eqn in enumerate(jaxpr.eqns):
        block = _block(eqn)
        if block is None:
            continue
        scalars = _scalars(eqn.invars[1], jaxpr.eqns, defined)
        if scalars is None or not all(type(x) is _LITERAL for x in scalars):
            continue
        shape, dims = block
        operand = eqn.invars[0].aval.shape
        inside = all(
            0 <= int(x.val) <= operand[d] - shape[d]
            for x, d in zip(scalars, dims, strict=True)
        )
        found.append((i, inside))
    return found


def _block(eqn: Any) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """`(the block's shape, the dimensions its start vector indexes)` of a
    scatter (adding or setting) or gather that moves one whole block of its
    array: one start vector, no dimension dropped or batched; else None."""
    params = eqn.params
    numbers = params.get("dimension_numbers")
    if numbers is None or getattr(numbers, "operand_batching_dims", ()):
        return None
    operand = eqn.invars[0].aval
    if operand.weak_type:
        return None
    if eqn.primitive in (_SCATTER_ADD, _SCATTER):
        updates = eqn.invars[2].aval
        dims = tuple(numbers.scatter_dims_to_operand_dims)
        if (
            numbers.inserted_window_dims
            or updates.ndim != operand.ndim
            or tuple(numbers.update_window_dims) != tuple(range(updates.ndim))
            or params.get("update_consts")
        ):
            return None
        shape = tuple(updates.shape)
    elif eqn.primitive is _GATHER:
        dims = tuple(numbers.start_index_map)
        if numbers.collapsed_slice_dims or tuple(numbers.offset_dims) != tuple(
            range(operand.ndim)
        ):
            return None
        shape = tuple(params["slice_sizes"])
    else:
        return None
    if eqn.invars[1].aval.shape != (len(dims),) or len(set(dims)) != len(dims):
        return None
    return shape, dims


def _scalars(indices: Any, eqns: Sequence[Any], defined: dict) -> list[Any] | None:
    """The scalars a start vector is built from, where it is a `concatenate`
    of one-element `broadcast_in_dim`s of scalars (or one such broadcast), as
    `jnp` builds it; else None."""
    if type(indices) is _LITERAL or indices not in defined:
        return None
    eqn = eqns[defined[indices]]
    parts = eqn.invars if eqn.primitive is _CONCATENATE else [indices]
    scalars = []
    for part in parts:
        if type(part) is _LITERAL or part not in defined:
            return None
        made = eqns[defined[part]]
        if (
            made.primitive is not _BROADCAST
            or len(made.invars) != 1
            or made.invars[0].aval.shape != ()
            or made.outvars[0].aval.shape != (1,)
        ):
            return None
        scalars.append(made.invars[0])
    return scalars


def moved(eqn: Any, eqns: Sequence[Any], defined: dict) -> list[Any] | None:
    """The equations that move a block inside its array (see `windows`) with a
    `dynamic_slice` and a `dynamic_update_slice` at the scalars its start vector
    is built from (now literals or inputs); None where they have other dtypes."""
    block = _block(eqn)
    scalars = _scalars(eqn.invars[1], eqns, defined)
    if block is None or scalars is None:
        return None
    if len({np.dtype(x.aval.dtype) for x in scalars}) != 1:
        return None
    shape, dims = block
    operand = eqn.invars[0]
    zero = _jax_private.literal(
        np.zeros((), scalars[0].aval.dtype).item(),
        _jax_private.strongly_typed(scalars[0].aval),
    )
    starts: list[Any] = [zero] * operand.aval.ndim
    for x, d in zip(scalars, dims, strict=True):
        starts[d] = x
    if eqn.primitive is _GATHER:

        def read(x: Any, *at: Any) -> Any:
            return _DYNAMIC_SLICE.bind(x, *at, slice_sizes=shape)

        return traced_as(read, [operand, *starts], eqn.outvars[0], eqn)
    adds = eqn.primitive is _SCATTER_ADD

    def write(x: Any, update: Any, *at: Any) -> Any:
        if adds:  # as the scatter adds: the array's element, then the update's
            update = jax.lax.add(_DYNAMIC_SLICE.bind(x, *at, slice_sizes=shape), update)
        return _DYNAMIC_UPDATE_SLICE.bind(x, update, *at)

    return traced_as(write, [operand, eqn.invars[2], *starts], eqn.outvars[0], eqn)
