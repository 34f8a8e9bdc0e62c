"""Programs that differ only in the numbers they embed: one generalised program.

A survey fits one scene per field, and every field puts its sources elsewhere:
a source's Python-int box origin becomes the start of a `slice`, the integers
`jnp` builds `frame.at[oy:oy + h, ox:ox + w]`'s start vector from, and, where
the origin enters arithmetic (`centre - origin`), a float literal. So every
field traces to its own program, and the programs differ in nothing but those
numbers.

Under `af.filter_jit(share_numbers=True)` a family's first program (programs
equal but for those numbers) compiles as its own; the second is *generalised*:
each number it embeds where a runtime value can stand, and that differs from the
first's, becomes an input (`selected`), and that compile serves every later
program of the family that differs from the first only there. What may be
lifted:

- every integer or floating-point scalar literal given to an equation, also to
  a nested `jit`, `custom_jvp`/`custom_vjp` or `checkpoint` call (it receives
  the literal as an argument, whatever it does with it inside). A literal
  stands for a value: the equation computes the same function of it whether it
  is constant or not, and its type (shape, dtype, weak type) is unchanged;
- the same numbers inside a nested `jax.jit` without shardings or constants of
  its own, passed to it as more arguments (a jitted helper the step calls);
- the program's constant arrays (`jnp.array([oy, ox])`, captured data), which
  become its first inputs;
- the starts of a unit-stride `slice`, which becomes a `dynamic_slice` of the
  same sizes, and of a `pad` that only grows or only crops, which becomes a
  `dynamic_update_slice` into a block of the padding value or a
  `dynamic_slice`. JAX checked each start against its operand's shape when it
  traced, so the dynamic form reads exactly what the static one reads (it
  never clamps);
- the starts of a block that a scatter writes or a gather reads at a start
  vector built from scalars (`frame.at[oy:oy + h, ox:ox + w].add(box)`, and its
  gradient): where the block lies within its array, the generalised program
  moves it with a `dynamic_slice` and a `dynamic_update_slice` at those
  scalars, which move exactly that block, instead of a scatter or gather
  that checks its bounds on every call (`_blocks.windows`). Whether each block lies
  within is part of the family, so a field whose block would be dropped runs
  a program that keeps the scatter.

What stays in the program, because it decides what runs rather than being a
value: the operands of `cond` (the branch index), `while` and `scan` (a loop's
bounds) and every number they are computed from (`lax.switch` clamps its index
between literals), the predicate of `select_n`, booleans; every parameter
(shapes, axes, strides, a `dynamic_slice`'s sizes, `integer_pow`'s exponent, a
`scan`'s length); and everything inside a loop body, a branch, a custom
derivative's or a checkpoint's own jaxpr. Programs that call back into Python
or carry effects, and jits with explicit shardings or layouts, are never
generalised.

A slice, pad or gather that an indexing equation reads is fenced with an
optimisation barrier in the generalised program (`_fenced`): XLA would merge
it with the read and lose the clamp of a start given at run time.

A trace whose lifted numbers include a float zero, subnormal, infinity or NaN
(or whose captured float arrays hold a subnormal, or only zeros) compiles its
own program instead (`folded_otherwise`): XLA folds such literals otherwise than
it computes with them at run time (`x + 0.0` keeps `-0.0`; a subnormal folds
to itself, and flushes to zero at run time).

The generalised program computes what each field's program computes, operation
for operation, but it is not the same program: XLA folds constants into what
reads them (`x * 2.0` into a fused multiply, a constant start into a fused
slice) and cannot fold a runtime value, so a fusion may round or sum in
another order. Results then differ from the field's own program in the last
bits of some elements (tests/test_numbers.py bounds it), which is why sharing
numbers is an option, never the default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.core
import jax.extend.core as jcore
import jax.numpy as jnp
import numpy as np

from . import _blocks, _jax_private
from ._program_key import closed_key

_LITERAL = jcore.Literal
_SLICE = jax.lax.slice_p
_PAD = jax.lax.pad_p
_INT32 = np.dtype(np.int32)
# Equations whose literal operands decide what runs: a branch index, a loop's
# bounds or carry (a `select_n`'s case is kept by `_liftable_operands`).
_DECIDES = frozenset({"cond", "while", "scan"})
# Higher-order equations that only pass their operands to a nested jaxpr as its
# arguments: a literal operand of theirs is a value like any other.
_PASSES_ON = frozenset(
    {"jit", "pjit", "custom_jvp_call", "custom_vjp_call", "checkpoint", "remat"}
)


class Site(NamedTuple):
    """Where numbers sit in a jaxpr: a scalar literal (`operand` its position
    among the equation's inputs), the starts of a placing equation, a slice or
    a pad (`operand` None; see `_placed`), or the numbers of a nested jit's
    own jaxpr (`inner` their sites there; see `_nested`)."""

    eqn: int
    operand: int | None
    inner: tuple[Site, ...] = ()


def _is_number(aval: Any) -> bool:
    dtype = getattr(aval, "dtype", None)
    return (
        getattr(aval, "shape", None) == ()
        and dtype is not None
        and (jnp.issubdtype(dtype, jnp.integer) or jnp.issubdtype(dtype, jnp.floating))
    )


def _nests(eqn: Any) -> bool:
    """Whether an equation holds a jaxpr in its parameters."""
    for value in eqn.params.values():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(v, _jax_private.JAXPR_TYPES):
                return True
    return False


def _liftable_operands(eqn: Any) -> range:
    """The positions of an equation's operands that a runtime value may take."""
    name = eqn.primitive.name
    if name in _DECIDES or (name not in _PASSES_ON and _nests(eqn)):
        return range(0)
    if name == "select_n":
        return range(1, len(eqn.invars))
    return range(len(eqn.invars))


def _deciding(jaxpr: Any) -> set[int]:
    """The equations whose results decide what runs: those a `cond`'s branch
    index or a `while`'s operands are computed from (`lax.switch` clamps its
    index with literal bounds first)."""
    deciding: set[int] = set()
    tainted: set[Any] = set()
    for i in reversed(range(len(jaxpr.eqns))):
        eqn = jaxpr.eqns[i]
        name = eqn.primitive.name
        if name == "cond":
            operands = eqn.invars[:1]
        elif name == "while":
            operands = eqn.invars
        elif any(v in tainted for v in eqn.outvars):
            deciding.add(i)
            operands = eqn.invars
        else:
            continue
        tainted.update(x for x in operands if type(x) is not _LITERAL)
    return deciding


def sites(jaxpr: Any) -> tuple[Site, ...]:
    """The numbers a jaxpr's equations embed, in order (a nested jit's after
    its equation's own literals)."""
    found = []
    deciding = _deciding(jaxpr)
    for i, eqn in enumerate(jaxpr.eqns):
        if i in deciding:
            continue
        for position in _liftable_operands(eqn):
            x = eqn.invars[position]
            if type(x) is _LITERAL and _is_number(x.aval):
                found.append(Site(i, position))
        if _placed(eqn):
            found.append(Site(i, None))
        elif _nested(eqn):
            inner = sites(eqn.params["jaxpr"].jaxpr)
            if inner:
                found.append(Site(i, None, inner))
    return tuple(found)


def _nested(eqn: Any) -> bool:
    """Whether an equation is a nested `jax.jit` whose numbers can be passed in
    as more arguments: no constants of its own, no shardings, layouts or
    options beyond donation (`_with_inputs` adds unsharded inputs)."""
    return (
        eqn.primitive.name in ("jit", "pjit")
        and not eqn.params["jaxpr"].consts
        and _unspecified(eqn.params) is not None
        and _jax_private.plain_jit_options(eqn.params)
    )


def _unspecified(params: dict[str, Any]) -> Any:
    """The value a jit's parameters give an input without a sharding, or None."""
    for sharding in (*params["in_shardings"], *params["out_shardings"]):
        if type(sharding).__name__ == "UnspecifiedValue":
            return sharding
    return None


def _with_inputs(eqn: Any, inner: Any, inputs: list[Any]) -> Any:
    """A nested jit's equation running `inner` (its jaxpr with more inputs at the
    end), given `inputs` for them: plain, undonated, unsharded."""
    params = dict(eqn.params)
    more = len(inputs)
    params["jaxpr"] = inner
    params["in_shardings"] = (*params["in_shardings"], *[_unspecified(params)] * more)
    params["in_layouts"] = (*params["in_layouts"], *[None] * more)
    params["donated_invars"] = (*params["donated_invars"], *[False] * more)
    return _jax_private.replaced(eqn, invars=[*eqn.invars, *inputs], params=params)


def _placed(eqn: Any) -> bool:
    """Whether an equation places a block at starts given as parameters, as a
    `dynamic_slice` or `dynamic_update_slice` would: a `slice` with unit
    strides, or a `pad` without interior padding that only grows or only crops
    (`_blocks.pad_kind`)."""
    if eqn.primitive is _SLICE:
        return all(stride == 1 for stride in eqn.params["strides"] or ())
    if eqn.primitive is _PAD:
        return _blocks.pad_kind(eqn) is not None
    return False


def _starts(eqn: Any) -> tuple[int, ...]:
    """A placing equation's starts: a slice's; where a pad puts its operand in
    its output ("grow") or where it takes its output from its operand ("crop")."""
    if eqn.primitive is _SLICE:
        return tuple(eqn.params["start_indices"])
    return tuple(abs(int(low)) for low, _, _ in eqn.params["padding_config"])


class Number(NamedTuple):
    """A number a program embeds: its value, and the type it has there."""

    value: Any
    dtype: np.dtype
    weak_type: bool


def numbers(jaxpr: Any, at: Sequence[Site]) -> tuple[Number, ...]:
    """The numbers at `at`: one per literal, one per dimension of a placing
    equation (int32, what `dynamic_slice` is given)."""
    found: list[Number] = []
    for site in at:
        eqn = jaxpr.eqns[site.eqn]
        if site.inner:
            found.extend(numbers(eqn.params["jaxpr"].jaxpr, site.inner))
        elif site.operand is None:
            found.extend(Number(start, _INT32, False) for start in _starts(eqn))
        else:
            aval = eqn.invars[site.operand].aval
            dtype = np.dtype(aval.dtype)
            value = np.asarray(eqn.invars[site.operand].val, dtype).item()
            found.append(Number(value, dtype, bool(aval.weak_type)))
    return tuple(found)


def selected(
    jaxpr: Any, at: Sequence[Site], lifted: frozenset[int]
) -> tuple[tuple[Site, ...], frozenset[int]]:
    """The sites of `at` holding a number whose index (in `numbers` order) is in
    `lifted`, and the indices of every number those sites hold: a placing
    equation's starts are lifted together, and a nested jit keeps only its
    own sites that hold one."""
    kept: list[Site] = []
    covered: set[int] = set()
    i = 0
    for site in at:
        eqn = jaxpr.eqns[site.eqn]
        if site.inner:
            inner_jaxpr = eqn.params["jaxpr"].jaxpr
            n = len(numbers(inner_jaxpr, site.inner))
            inner, inner_covered = selected(
                inner_jaxpr,
                site.inner,
                frozenset(k - i for k in lifted if i <= k < i + n),
            )
            if inner:
                kept.append(Site(site.eqn, None, inner))
                covered.update(i + k for k in inner_covered)
        else:
            n = len(_starts(eqn)) if site.operand is None else 1
            if any(i <= k < i + n for k in lifted):
                kept.append(site)
                covered.update(range(i, i + n))
        i += n
    return tuple(kept), frozenset(covered)


def folded_otherwise(found: Sequence[Number], consts: Sequence[Any]) -> bool:
    """Whether XLA may compute with these values otherwise as literals than as
    inputs, so that the generalised program would not give what the trace's
    own program gives: a float number that is zero (either sign: `x + 0.0`
    folds to `x`, keeping `-0.0`), subnormal (folded at compile time, flushed
    to zero at run time), infinite or NaN; a float constant array holding a
    subnormal, or only zeros. Such a trace compiles its own program."""
    for number in found:
        if _floating(number.dtype):
            value = np.asarray(number.value, number.dtype)
            if value == 0 or not np.isfinite(value) or _subnormal(value):
                return True
    for const in consts:
        dtype = getattr(const, "dtype", None)
        if dtype is None or not _floating(dtype) or const.size == 0:
            continue
        values = np.asarray(const)
        if not np.any(values) or np.any(_subnormal(values)):
            return True
    return False


def _floating(dtype: Any) -> bool:
    return bool(jnp.issubdtype(dtype, jnp.floating))  # bfloat16's kind is "V"


def _subnormal(values: np.ndarray) -> np.ndarray:
    return (values != 0) & (np.abs(values) < jnp.finfo(values.dtype).tiny)


def bits(found: Sequence[Number]) -> tuple[bytes, ...]:
    """Each number as its type's bytes: equal exactly when the literals are the
    same (`-0.0` is not `0.0`, a NaN is its own payload)."""
    return tuple(np.asarray(n.value, n.dtype).tobytes() for n in found)


def packed(found: Sequence[Number]) -> tuple[np.ndarray, ...]:
    """The numbers as the generalised program takes them: one vector per
    dtype, in the order the dtypes first occur (`unpacking`)."""
    by_dtype: dict[np.dtype, list[Any]] = {}
    for number in found:
        by_dtype.setdefault(number.dtype, []).append(number.value)
    return tuple(np.asarray(values, dtype) for dtype, values in by_dtype.items())


def unpacking(found: Sequence[Number]) -> tuple[tuple[int, int, bool], ...]:
    """`(vector, position, weak_type)` of each number in `packed`'s vectors."""
    vectors: dict[np.dtype, list[int]] = {}
    where = []
    for number in found:
        positions = vectors.setdefault(number.dtype, [len(vectors), 0])
        where.append((positions[0], positions[1], number.weak_type))
        positions[1] += 1
    return tuple(where)


def unpacked(vectors: Sequence[Any], where: Sequence[tuple[int, int, bool]]) -> list:
    """Inside a generalised program's caller: the numbers from `packed`'s
    vectors, each a slice of a runtime input (XLA cannot fold it into a
    constant), weakly typed where the literal was."""
    numbers = []
    for vector, i, weak in where:
        value = jax.lax.index_in_dim(vectors[vector], i, keepdims=False)
        numbers.append(_jax_private.weakly_typed(value) if weak else value)
    return numbers


# XLA's simplifier merges a slice of a slice (or a gather from one) into one
# read of the outer array, adding the starts without clamping the inner start
# to the inner slice. With literal starts XLA clamps them as it compiles and
# the merged read is right; with a start given at run time it reads past the
# inner slice (`jnp.take(v[2:5], 9, mode="clip")` gave `v[8]`, not `v[4]`). So
# in a generalised program every cut that an indexing equation reads goes
# through an optimisation barrier, which XLA does not look through: each
# equation then clamps as its own semantics say. Cuts read elementwise are
# left alone, to fuse as before.
_CUTS = frozenset({"slice", "dynamic_slice", "pad", "gather"})
_INDEXING = frozenset({"dynamic_slice", "dynamic_update_slice", "gather"})
# Equations that only move or retype elements: a cut read through them is
# still read by the indexing equation after them.
_MOVES = frozenset(
    {
        "reshape",
        "squeeze",
        "expand_dims",
        "broadcast_in_dim",
        "convert_element_type",
        "copy",
        "copy_p",
        "transpose",
        "rev",
    }
)


def _indexed(eqns: Sequence[Any]) -> set[Any]:
    """The variables an indexing equation reads as the array it indexes, also
    through equations that only move elements, or that a nested call receives."""
    indexed: set[Any] = set()
    for eqn in reversed(eqns):
        name = eqn.primitive.name
        if name in _INDEXING or name.startswith("scatter"):
            reads = eqn.invars[:1]
        elif name in _PASSES_ON or (name in _MOVES and indexed & set(eqn.outvars)):
            reads = eqn.invars
        else:
            continue
        indexed.update(x for x in reads if type(x) is not _LITERAL)
    return indexed


def _fenced(eqns: list[Any]) -> list[Any]:
    """`eqns` with an optimisation barrier after every cut an indexing equation
    reads (see `_CUTS`)."""
    indexed = _indexed(eqns)
    fenced: list[Any] = []
    for eqn in eqns:
        out = eqn.outvars[0] if len(eqn.outvars) == 1 else None
        if out is None or eqn.primitive.name not in _CUTS or out not in indexed:
            fenced.append(eqn)
            continue
        cut = _jax_private.new_var(out.aval)
        fenced.append(_jax_private.replaced(eqn, outvars=[cut]))
        fenced.extend(_blocks.traced_as(jax.lax.optimization_barrier, [cut], out, eqn))
    return fenced


def blanked(closed: Any, at: Sequence[Site]) -> Any:
    """`closed` with every number at `at` blanked (literals made inputs, a
    placing equation's starts erased): two programs give equal keys for it
    (`_program_key.closed_key`) exactly when they differ only in those
    numbers. Only keyed, never run."""
    jaxpr = closed.jaxpr
    eqns = list(jaxpr.eqns)
    added = []
    for site in at:
        eqn = eqns[site.eqn]
        if site.inner:
            inner = blanked(eqn.params["jaxpr"], site.inner)
            new = inner.jaxpr.invars[len(eqn.params["jaxpr"].jaxpr.invars) :]
            outer = [_jax_private.new_var(v.aval) for v in new]
            added.extend(outer)
            eqns[site.eqn] = _with_inputs(eqn, inner, outer)
        elif site.operand is None:
            params = dict(eqn.params)
            if eqn.primitive is _SLICE:
                params["start_indices"] = params["limit_indices"] = None
            else:  # what a pad adds before and after: their sum is in the shape
                params["padding_config"] = _blocks.pad_kind(eqn)
            eqns[site.eqn] = _jax_private.replaced(eqn, params=params)
        else:
            invars = list(eqn.invars)
            var = _jax_private.new_var(invars[site.operand].aval)
            invars[site.operand] = var
            added.append(var)
            eqns[site.eqn] = _jax_private.replaced(eqn, invars=invars)
    # Constants keyed by their type alone: the generalised program takes them.
    new = _jax_private.replaced(
        jaxpr, constvars=[], invars=[*jaxpr.constvars, *jaxpr.invars, *added], eqns=eqns
    )
    return _jax_private.closed_jaxpr(new)


def family_key(closed: Any, at: Sequence[Site], params: dict[str, Any]) -> tuple:
    """The key of `closed` (compiled with the jit parameters `params`) with its
    numbers at `at` blanked: equal for two programs exactly when they differ
    only in those numbers, and their blocks (`_blocks.windows`) lie within their
    arrays alike."""
    bounds = tuple(inside for _, inside in _blocks.windows(closed.jaxpr))
    return closed_key(blanked(closed, at), params), bounds


def generalised(closed: Any, at: Sequence[Site], top: bool = True) -> Any:
    """`closed` with its constants made its first inputs and every number at
    `at` an input after its own, in `numbers` order (type-checked by JAX: one it
    would not accept raises). A literal's input has the literal's type, weak or
    not; a start is int32. In the program itself (`top`; not in a nested
    jit's, whose blocks the family key does not check), each block that lies
    within its array (`_blocks.windows`) is moved by a dynamic slice or update."""
    jaxpr = closed.jaxpr
    eqns = list(jaxpr.eqns)
    added: list[Any] = []

    def number_input(aval: Any) -> Any:
        var = _jax_private.new_var(aval)
        added.append(var)
        return var

    int32 = jax.core.ShapedArray((), _INT32)  # pyright: ignore[reportAttributeAccessIssue]
    spliced: dict[int, list[Any]] = {}
    for site in at:
        eqn = eqns[site.eqn]
        if site.inner:
            inner = generalised(eqn.params["jaxpr"], site.inner, top=False)
            new = inner.jaxpr.invars[len(eqn.params["jaxpr"].jaxpr.invars) :]
            inputs = [number_input(v.aval) for v in new]
            eqns[site.eqn] = _with_inputs(eqn, inner, inputs)
        elif site.operand is None:
            starts = [number_input(int32) for _ in _starts(eqn)]
            spliced[site.eqn] = _blocks.dynamic(eqn, starts)
        else:
            invars = list(eqn.invars)
            invars[site.operand] = number_input(invars[site.operand].aval)
            eqns[site.eqn] = _jax_private.replaced(eqn, invars=invars)
    if top:
        defined = {v: i for i, eqn in enumerate(eqns) for v in eqn.outvars}
        for i, inside in _blocks.windows(jaxpr):
            moved = _blocks.moved(eqns[i], eqns, defined) if inside else None
            if moved is not None:
                spliced[i] = moved
    eqns = _fenced([e for i, eqn in enumerate(eqns) for e in spliced.get(i, (eqn,))])
    debug_info = jaxpr.debug_info
    if debug_info is not None and debug_info.arg_names is not None:
        constants = ("constant",) * len(jaxpr.constvars)
        names = (*constants, *debug_info.arg_names, *("number",) * len(added))
        debug_info = _jax_private.with_arg_names(debug_info, names)
    new = _jax_private.replaced(
        jaxpr,
        constvars=[],
        invars=[*jaxpr.constvars, *jaxpr.invars, *added],
        eqns=eqns,
        debug_info=debug_info,
    )
    _jax_private.check_jaxpr(new)
    return _jax_private.closed_jaxpr(new)
