"""The programs `af.filter_jit` compiles: the user's function on flat leaves,
the marker that makes a program's callbacks finish before its call returns, and
the `jax.jit` kept for each call structure (`Compiled`).

`_jit` decides which program a call runs and calls it; this module says what
the programs are, so that both halves read on their own.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import jax
import jax.core
import jax.dtypes
import jax.extend
import jax.tree_util as jtu
import numpy as np

from . import _callable_key, _internals

# What `eqx.is_array` accepts: these leaves are traced, all others hashed.
ARRAY_TYPES = _internals.EQX_ARRAY_TYPES
_Tracer = jax.core.Tracer  # pyright: ignore[reportAttributeAccessIssue]
_flatten = jtu.default_registry.flatten  # jtu.tree_flatten without its Python frame
# Equinox's error stacks skip its own frames: these run inside every trace.
_internals.hide_from_tracebacks(__file__)


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
_SHAPE_DTYPE_WEAK = operator.attrgetter("shape", "dtype", "weak_type")


def call_signature(call_args: tuple) -> tuple:
    """What a program's `jax.jit` tells calls apart by, as far as traces go: each
    leaf's shape, dtype and weak type, read alike from a call's arrays and from
    a trace's tracers."""
    # `(leaves,)` for a plain function, the common case (see `_jit._Layout`).
    leaves = call_args[0] if len(call_args) == 1 else jtu.tree_leaves(call_args)
    try:
        return tuple(map(_SHAPE_DTYPE_WEAK, map(_AVAL, leaves)))
    except AttributeError:  # a NumPy array: traced as its canonical dtype, strong
        return tuple(
            _SHAPE_DTYPE_WEAK(x.aval)
            if hasattr(x, "aval")
            else (np.shape(x), jax.dtypes.canonicalize_dtype(np.result_type(x)), False)
            for x in leaves
        )


class History:
    """Which globals each trace of one `jax.jit` read: per call signature, their
    values when it was traced (`context` is what the trace runs: the tracing
    call's structure and static leaves, and the jitted function)."""

    __slots__ = ("context", "traced")

    def __init__(self, context: tuple):
        self.context = context
        self.traced: dict[tuple, _callable_key.Globals | None] = {}

    def record(self, call_args: tuple) -> _callable_key.Globals | None:
        """Run by each trace that completes (see `user_program`): the latest
        trace of a signature is the one JAX keeps (after `jax.clear_caches()`,
        or under other config settings, it traces a signature again). Returns
        the globals it read."""
        reads = _callable_key.globals_read(self.context)
        self.traced[call_signature(call_args)] = reads
        return reads

    def serves(self, signature: tuple) -> bool:
        """Whether a call with this signature that traces now would read what
        the program runs: it has no trace for it yet (the call traces it), or
        the globals its trace read hold the same values now."""
        if signature not in self.traced:
            return True
        now = _callable_key.globals_read(self.context)
        return _callable_key.same_reads(self.traced[signature], now)


class Compiled:
    """The `jax.jit` for one call structure.

    `eqx.filter_jit` makes every program return a marker array and waits for it,
    so that a failing `eqx.error_if` raises at the call. Only host callbacks
    (`eqx.error_if`, `jax.debug.print`, `jax.pure_callback`, ...) run Python while
    a program executes, so here each trace decides for its own program: the user's
    function is traced by an inner `jax.jit`, whose jaxpr says whether it calls
    back; only then (or when buffers are donated) does the program return a
    marker to wait for. Other programs return no marker (an extra output costs
    about a microsecond a call) and calls return once dispatched, like `jax.jit`.
    """

    __slots__ = (
        "history",
        "jitted",
        "outputs",
        "pairs",
        "routes",
        "shared_key",
        "traced",
        "versions",
    )

    def __init__(self, traced: tuple[int, ...] | None):
        self.jitted: Any = None
        # The traces of `jitted`, one History for this program and its copies
        # (`shared_with`); None where nothing shares it (no share_callables).
        self.history: History | None = None
        # Once more than one caller (a callable, as equinox tells them apart)
        # runs this program: (caller, signature) -> the program that caller's
        # calls with that signature run, chosen at its first such call (see
        # `route`). None while one caller does: calls skip routing.
        self.routes: dict[tuple[int, tuple], Compiled] | None = None
        # Programs for this call structure traced anew under rebound globals.
        self.versions: list[Compiled] = []
        # Where the traced leaves are, when some leaves are static (calls pass only
        # the traced ones); None when every leaf is traced.
        self.traced = traced
        # For a call sharing another call's program: its objects paired with those
        # of the call that traced it, and the output's static part with its own
        # objects in (once known). None for the call that traced the program.
        self.pairs: _callable_key.Counterparts | None = None
        self.outputs: tuple[Any, Any] | None = None
        # Its key in its layout's `shared`, while other calls may still share it.
        self.shared_key: _callable_key.SharedKey | None = None

    def shared_with(self, pairs: _callable_key.Counterparts) -> Compiled:
        """This program, for a call whose callables `pairs` maps to this one's;
        both route their calls from now on."""
        shared = Compiled(self.traced)
        shared.jitted = self.jitted
        shared.history = self.history
        shared.pairs = pairs
        shared.routes = {}
        self.route_from_now()
        return shared

    def route_from_now(self) -> None:
        """Start routing calls, as a second caller has come: the only one so far
        (caller 0, the function its layout was made for) keeps every trace it
        made."""
        if self.routes is None and self.history is not None:
            self.routes = {(0, signature): self for signature in self.history.traced}

    def route(
        self, caller: int, signature: tuple, compile_anew: Callable[[], Compiled]
    ) -> Compiled:
        """The program a caller's first call with `signature` runs, from then on
        (under the lock of `_jit`).

        As under `eqx.filter_jit`, where each callable has a cache of its own, a
        caller runs its own traces for good, and a signature new to it traces
        now: another caller's trace serves it only if the globals that trace read
        hold the same values now. Otherwise a version of this program traced
        under today's globals does (`compile_anew` makes one)."""
        assert self.routes is not None and self.history is not None
        chosen: Compiled | None = None
        if self.history.serves(signature):
            chosen = self
        else:
            for version in self.versions:
                assert version.history is not None
                if version.history.serves(signature):
                    chosen = version
                    break
            else:
                chosen = compile_anew()
                self.versions.append(chosen)
        self.routes[caller, signature] = chosen
        return chosen

    def own_outputs(self, traced_outputs: tuple[Any, Any]) -> tuple[Any, Any]:
        """The output's static part `(treedef, values)` as the trace made it, with
        the objects it passed through from the tracing call's input replaced by
        this call's (a scene returned by the step keeps its own renderer)."""
        pairs = self.pairs
        if pairs is None:
            return traced_outputs
        outputs = self.outputs
        if outputs is None or outputs[0] is not traced_outputs:
            tree, values = traced_outputs
            own = (
                _callable_key.swap(tree, pairs),
                _callable_key.swap(values, pairs),
            )
            outputs = self.outputs = (traced_outputs, own)
        return outputs[1]

    def own_output(self, output: Any) -> Any:
        """An output of arrays only, with this call's objects in its static fields
        where the trace passed the tracing call's through (see `own_outputs`)."""
        leaves, tree = _flatten(output)
        outputs = self.outputs
        if outputs is None or outputs[0] != tree:
            outputs = self.outputs = (tree, _callable_key.swap(tree, self.pairs or {}))
        own_tree = outputs[1]
        return (
            output if own_tree is outputs[0] else jtu.tree_unflatten(own_tree, leaves)
        )


def concrete(marker: Any) -> bool:
    # equinox's test: an array, not a tracer (equinox issue #988)
    return isinstance(marker, jax.Array) and not isinstance(marker, _Tracer)


def jit_disabled() -> bool:
    return bool(jax.config.jax_disable_jit)  # pyright: ignore[reportAttributeAccessIssue]


_CLOSED_JAXPR = jax.extend.core.ClosedJaxpr
_JAXPR = jax.extend.core.Jaxpr


def has_host_work(closed: Any) -> bool:
    """Whether a program has effects or calls back into Python (any depth)."""
    if closed.effects:
        return True
    pending = [closed.jaxpr]
    while pending:
        jaxpr = pending.pop()
        for eqn in jaxpr.eqns:
            if "callback" in eqn.primitive.name or eqn.effects:
                return True
            for value in eqn.params.values():
                values = value if isinstance(value, (tuple, list)) else (value,)
                for v in values:
                    if isinstance(v, _CLOSED_JAXPR):
                        pending.append(v.jaxpr)
                    elif isinstance(v, _JAXPR):
                        pending.append(v)
    return False


def user_program(
    static_fun: Any,
    treedef: Any,
    static: tuple,
    traced: tuple[int, ...] | None,
    fun_at: int | None,
    on_trace: Callable[[tuple], None] | None = None,
) -> Callable[..., tuple]:
    """The user's function on flat leaves: `(*parts of the traced leaves, with the
    function's arrays at fun_at) -> (output, None)`, or `-> (output's arrays,
    Static(rest))` when the output has leaves that are not arrays."""
    fun_leaves, fun_tree = static_fun

    def run(*call_args: Any) -> tuple:
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
            dynamic, leaves = leaves, list(static)
            for i, x in zip(traced, dynamic, strict=True):
                leaves[i] = x
        tree = jtu.tree_unflatten(treedef, leaves)
        args, kwargs = tree.parts if type(tree) is WithKeywords else (tree, {})
        out = fun(*args, **kwargs)
        # After the function: a trace that raises leaves no program behind. Not
        # with jit disabled, where this runs eagerly and JAX keeps no trace.
        if on_trace is not None and not jit_disabled():
            on_trace(call_args)
        out_leaves, out_tree = jtu.tree_flatten(out)
        if all(isinstance(x, ARRAY_TYPES) for x in out_leaves):
            return out, None  # JAX rebuilds the output itself
        arrays = [x if isinstance(x, ARRAY_TYPES) else None for x in out_leaves]
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
    inner = jax.jit(run)

    def flat(*call_args: Any) -> Any:
        if jit_disabled():  # runs eagerly: nothing to trace
            return Marked((jax.numpy.array(0), *run(*call_args)))
        # The one trace of the user's function; the call below reuses it.
        host_work = has_host_work(inner.trace(*call_args).jaxpr)
        # What a call waits on, as in equinox; None costs no output buffer.
        marker = jax.numpy.array(0) if host_work or always_wait else None
        out, others = inner(*call_args)
        if marker is None and others is None:
            return out
        return Marked((marker, out, others))

    return flat
