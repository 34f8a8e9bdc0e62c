"""The programs `af.filter_jit` compiles: the user's function on flat leaves,
named as equinox names it (`names`), the marker that makes a program's
callbacks finish before its call returns, and the `jax.jit` kept for each call
structure (`Compiled`).

`_jit` decides which program a call runs and calls it; this module says what
the programs are, so that both halves read on their own.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import operator
import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.core
import jax.dtypes
import jax.extend
import jax.tree_util as jtu
import numpy as np

from . import _eqx_private, _executables, _jax_private, _tracing

_is_traced = _eqx_private.is_traced_leaf
_Tracer = jax.core.Tracer  # pyright: ignore[reportAttributeAccessIssue]
_flatten = jtu.default_registry.flatten  # jtu.tree_flatten without its Python frame
# Equinox's error stacks skip its own frames: these run inside every trace.
_jax_private.hide_from_tracebacks(__file__)


@jtu.register_static
class Static:
    """The non-array part of an output, carried in the output's tree structure
    (a static node: no children, so JAX rebuilds it without calling back)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


class Marked:
    """A program's output when it has more than arrays to give back: `(marker,
    output or its arrays, Static(rest) or None)`. A program whose output is arrays
    only and that needs no marker returns the output alone, which saves JAX a
    tuple and two empty nodes on every call; the caller tells them apart by type
    (a user's function cannot return this private class)."""

    __slots__ = ("parts",)

    def __init__(self, parts: tuple[Any, Any, Any]):
        self.parts = parts


jtu.register_pytree_node(
    Marked, lambda node: (node.parts, None), lambda _, parts: Marked(parts)
)


class WithKeywords:
    """The arguments of a call with keywords, `(args, kwargs)`, as one pytree node.

    A call without keywords (the common case) is keyed by the structure of its
    positional arguments alone, one node fewer to flatten; this node at the root
    keeps a call with keywords from ever having the same structure as positional
    arguments that happen to look like `(tuple, dict)`."""

    __slots__ = ("parts",)

    def __init__(self, parts: tuple[tuple, dict]):
        self.parts = parts


jtu.register_pytree_node(
    WithKeywords,
    lambda node: (node.parts, None),
    lambda _, parts: WithKeywords(parts),
)


_AVAL = operator.attrgetter("aval")
_COMMITTED = operator.attrgetter(_jax_private.COMMITTED_ATTRIBUTE)


def names(fun: Any) -> tuple[str, str]:
    """`(__name__, __qualname__)` of what `fun` wraps, as equinox names the
    programs it compiles: past `functools.wraps` and `functools.partial`, and the
    class's names for a callable object without its own."""
    while True:
        if hasattr(fun, "__wrapped__"):
            fun = fun.__wrapped__
        elif isinstance(fun, functools.partial):
            fun = fun.func
        else:
            break
    try:
        return fun.__name__, fun.__qualname__
    except AttributeError:
        return type(fun).__name__, type(fun).__qualname__


def arity(signature: inspect.Signature) -> tuple[int, float]:
    """The positional argument counts that `signature.bind(*args)` leaves unchanged.

    Without keywords, a call binds to exactly the arguments it passed whenever it
    binds at all; outside this range (or with keywords) the call goes through
    `signature.bind` as in equinox, which normalises it or raises its TypeError.
    """
    low, high = 0, 0.0
    for p in signature.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            high += 1
            if p.default is p.empty:
                low = int(high)
        elif p.kind is p.VAR_POSITIONAL:
            high = float("inf")
        elif p.kind is p.KEYWORD_ONLY and p.default is p.empty:
            return 1, 0.0  # a required keyword: no call without keywords binds
    return low, high


def call_signature(leaves: list) -> tuple:
    """What decides which executable runs a call of one call structure, as
    `jax.jit` decides it: JAX's configuration, each leaf's aval (shape, dtype,
    weak type) and, for arrays committed to devices, their shardings."""
    try:
        avals = tuple(map(_AVAL, leaves))
    except AttributeError:  # a NumPy array: traced as its canonical dtype, strong
        avals = tuple(
            x.aval
            if hasattr(x, "aval")
            else (np.shape(x), jax.dtypes.canonicalize_dtype(np.result_type(x)))
            for x in leaves
        )
        return (_jax_private.trace_context(), avals, None)
    try:
        any_committed = any(map(_COMMITTED, leaves))
    except AttributeError:  # a NumPy array or another literal array type
        any_committed = any(map(_jax_private.committed, leaves))
    committed = None
    if any_committed:
        committed = tuple(
            x.sharding if _jax_private.committed(x) else None for x in leaves
        )
    return (_jax_private.trace_context(), avals, committed)


class Compiled:
    """The `jax.jit` for one call structure, and the executables its calls run.

    `eqx.filter_jit` makes every program return a marker array and waits for it,
    so that a failing `eqx.error_if` raises at the call. Only host callbacks
    (`eqx.error_if`, `jax.debug.print`, `jax.pure_callback`, ...) run Python while
    a program executes, so here each trace decides for its own program: the user's
    function is traced by an inner `jax.jit`, whose jaxpr says whether it calls
    back; only then (or when buffers are donated) does the program return a
    marker to wait for. Other programs return no marker (an extra output costs
    about a microsecond a call) and calls return once dispatched, like `jax.jit`.

    With sharing on, `runs` maps each call signature to what runs it: the
    `jax.jit`'s own trace, compiled, or where the same program was compiled
    before (by any wrapper, for any call structure) that executable with this
    trace's output tree. None with sharing off: calls go to `jitted`.
    """

    __slots__ = (
        "__weakref__",
        "direct",
        "fast",
        "jitted",
        "last",
        "numbers",
        "runs",
        "traced",
    )

    def __init__(self, traced: tuple[int, ...] | None, share: bool, numbers: bool):
        self.jitted: Any = None
        self.runs: dict[tuple, Callable[..., Any]] | None = None
        # `(signature, run)` of the latest call: compared before `runs` is
        # hashed (a signature holds JAX's whole configuration).
        self.last: tuple[tuple, Callable[..., Any]] | None = None
        # `(JAX's trace context, run)` where this structure's only signature so
        # far runs a family's generalised program: a `jax.jit` that checks the
        # call's avals and placement itself, in C++, and raises
        # `_executables.OtherSignature` where it would trace for other avals.
        # Calls in that context skip `call_signature` (see `_jit._call`).
        self.fast: tuple[tuple, Callable[..., Any]] | None = None
        # Whether calls go straight to `jitted`: once its first trace was a
        # program of its own, `jax.jit` picks the executable (in C++), and finds
        # that compile in JAX's cache. A new signature then compiles without
        # looking for a shared program: fewer compiles saved, never a wrong one.
        self.direct = not share
        if share:
            self.runs = {}
            # `jax.clear_caches()` makes `jax.jit` trace again: so do these calls.
            _executables.sharing.add(self)
        # Where the traced leaves are, when some leaves are static (calls pass only
        # the traced ones); None when every leaf is traced.
        self.traced = traced
        # Whether programs that differ only in numbers share one (`_numbers`).
        self.numbers = numbers

    def cache_clear(self) -> None:
        assert self.runs is not None
        self.runs.clear()
        self.last = self.fast = None
        self.direct = False

    def runner(self, call_args: tuple, signature: tuple) -> Callable[..., Any]:
        """What runs calls with this signature, found at the first such call:
        `jax.jit` traces it (exactly when `eqx.filter_jit` would), and the program
        it traced to is compiled unless this process compiled it already."""
        assert self.runs is not None
        traced = self.jitted.trace(*call_args)
        # Where committed arrays sit decides the devices it compiles for.
        executable, own, numbers = _executables.executable_for(
            traced, signature[2], call_args, self.numbers
        )
        out_tree = _jax_private.traced_out_tree(traced)
        if own:
            run = self.jitted  # it finds this compile in JAX's own cache
            if not self.runs:
                self.direct = True  # the first trace: from now on, see `direct`
        elif numbers is None:
            # Where both traces returned the same tree (two wrappers of one
            # function, say), the executable builds this trace's output itself.
            run = (
                executable
                if same_tree(executable.out_tree, out_tree)
                else functools.partial(
                    _executables.with_output_tree, executable, out_tree
                )
            )
        else:
            run = functools.partial(
                _executables.with_numbers, executable, numbers, out_tree
            )
        # Threads that met this signature at once each traced it (as `jax.jit`
        # lets them); the first to get here decides what later calls run.
        run = self.runs.setdefault(signature, run)
        self.last = (signature, run)
        only = numbers is not None and len(self.runs) == 1
        self.fast = (signature[0], run) if only else None
        return run


def same_tree(a: Any, b: Any) -> bool:
    """Whether two treedefs hold the same objects in their nodes: not only equal
    (`1 == 1.0 == True`, `0.0 == -0.0`) but of one type and, for floats, one
    bit pattern; any object other than containers and Python's scalars only as
    itself. A call may then return the objects of the trace that compiled its
    program (walked once per signature)."""
    if a.num_nodes != b.num_nodes:
        return False
    pending = [(a, b)]
    while pending:
        x, y = pending.pop()
        if not _same_object(x.node_data(), y.node_data()):
            return False
        pending.extend(zip(x.children(), y.children(), strict=True))
    return True


def _same_object(a: Any, b: Any) -> bool:
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind in (tuple, list):
        return len(a) == len(b) and all(map(_same_object, a, b))
    if kind is dict:
        return list(a) == list(b) and all(map(_same_object, a.values(), b.values()))
    if kind in (float, complex):
        return repr(a) == repr(b)  # -0.0 apart from 0.0; NaN as itself
    return kind in (int, bool, str, bytes) and a == b


def concrete(marker: Any) -> bool:
    # equinox's test: an array, not a tracer (equinox issue #988)
    return isinstance(marker, jax.Array) and not isinstance(marker, _Tracer)


def call_checks_on() -> bool:
    """Whether a JAX switch asks `jax.jit` for checks it makes as a program is
    called, which an executable called directly skips: NaNs and infinities in
    the outputs (`FloatingPointError`, after a rerun op by op that names the
    operation) and PRNG key reuse. Public reads, made only where a call would
    run a program compiled for another trace."""
    config = jax.config
    return bool(
        config.jax_debug_nans  # pyright: ignore[reportAttributeAccessIssue]
        or config.jax_debug_infs  # pyright: ignore[reportAttributeAccessIssue]
        or config.jax_debug_key_reuse  # pyright: ignore[reportAttributeAccessIssue]
    )


class _StaticNow(threading.local):
    """The static leaves and function static part of the call that may trace
    now, in this thread (set by `_jit` before a call that can trace). What the
    trace did is kept in `_tracing.record`, for the diagnostics."""

    leaves: tuple
    fun: Any


static_now = _StaticNow()


def user_program(
    static_fun: Any,
    treedef: Any,
    static: tuple,
    traced: tuple[int, ...] | None,
    fun_at: int | None,
) -> Callable[..., tuple]:
    """The user's function on flat leaves: `(*parts of the traced leaves, with the
    function's arrays at fun_at) -> (output, None)`, or `-> (output's arrays,
    Static(rest))` when the output has leaves that are not arrays."""

    def run(*call_args: Any) -> tuple:
        # The calling wrapper's own static part: equal to the layout's, but JAX
        # traces with what the call passed (`Partial(f, 1)` after `Partial(f, True)`).
        # (`static_now.fun` pairs a layout's static part with the caller's.)
        pair = getattr(static_now, "fun", None)
        own = pair[1] if pair is not None and pair[0] is static_fun else static_fun
        fun_leaves, fun_tree = own
        if fun_at is None:  # no arrays in the function: its static leaves are it
            parts = call_args
            fun = jtu.tree_unflatten(fun_tree, fun_leaves)
        else:
            dynamic_fun = call_args[fun_at]
            parts = call_args[:fun_at] + call_args[fun_at + 1 :]
            fun = jtu.tree_unflatten(
                fun_tree,
                [
                    d if s is None else s
                    for d, s in zip(dynamic_fun, fun_leaves, strict=True)
                ],
            )
        leaves = [x for part in parts for x in part]
        if traced is not None:  # put the traced leaves among the static ones
            # The calling call's own static leaves: equal to the key's, but
            # JAX traces with the values a call passed (`True` after `1`).
            dynamic, leaves = leaves, list(getattr(static_now, "leaves", static))
            for i, x in zip(traced, dynamic, strict=True):
                leaves[i] = x
        tree = jtu.tree_unflatten(treedef, leaves)
        args, kwargs = tree.parts if type(tree) is WithKeywords else (tree, {})
        out = fun(*args, **kwargs)
        out_leaves, out_tree = jtu.tree_flatten(out)
        if all(_is_traced(x) for x in out_leaves):
            return out, None  # JAX rebuilds the output itself
        arrays = [x if _is_traced(x) else None for x in out_leaves]
        others = [
            None if a is not None else x
            for a, x in zip(arrays, out_leaves, strict=True)
        ]
        return arrays, Static((out_tree, others))

    return run


def marked_program(
    run: Callable[..., tuple], always_wait: bool
) -> Callable[..., tuple]:
    """`run`, with a marker to wait on first when its program calls back (or
    `always_wait`), else None (see `Compiled`): the output alone when it is
    arrays only and there is no marker, else a `Marked`."""
    # Inlined into the program: a nested jit would make every captured constant
    # of the user's function an output of the outer one under `jax.grad` (a
    # residual), and a donated argument of that shape would back it, deleted
    # where `eqx.filter_jit` leaves it (tests/test_jit_differential.py).
    inner = jax.jit(run, inline=_jax_private.EARLY_INLINE)

    def flat(*call_args: Any) -> Any:
        if _jax_private.jit_disabled():  # runs eagerly: nothing to trace
            return Marked((jax.numpy.array(0), *run(*call_args)))
        # The one trace of the user's function; the call below reuses it.
        traced = inner.trace(*call_args)
        if _tracing.record.watched:  # explain_retraces says what is new in it
            # This jaxpr, not the outer one: inlining drops the user's lines.
            # (A trace inside another, or a JAX whose traced jits show no
            # program: then no explanation says what is new in it.)
            with contextlib.suppress(ValueError, AttributeError):
                program = _jax_private.traced_program(traced)
                _tracing.record.program = (_tracing.counter.traces, program)
        host_work = _executables.has_host_work(traced.jaxpr)
        # What a call waits on, as in equinox; None costs no output buffer.
        marker = jax.numpy.array(0) if host_work or always_wait else None
        out, others = inner(*call_args)
        if marker is None and others is None:
            return out
        return Marked((marker, out, others))

    return flat
