"""`af.filter_jit`: `eqx.filter_jit`'s semantics with a shorter path to `jax.jit`.

`eqx.filter_jit` rebuilds three partitioned pytrees and a donation dictionary on
every call before `jax.jit` hashes them again. This wrapper flattens the arguments
once, keys a dictionary of `jax.jit`s by exactly what equinox's cache key holds
(the tree structure, which carries static fields, and every non-array leaf by
value), and calls that `jax.jit` with the array leaves. Everything else it cannot
reproduce exactly (jit options, unhashable static leaves, `.lower`) goes to the
`eqx.filter_jit` wrapper it keeps for that purpose.

A call whose exact key is new is looked up once more by what its callables trace
to (`_callable_key.SharedKey`): a scene built per field with its own partials and
lambdas then reuses the program the first field compiled. The hot path, a call
whose exact key is known, is the same with or without that sharing.

What each compiled program is (the user's function on flat leaves, the marker a
call waits on) lives in `_program`; this module picks the program and calls it.
"""

from __future__ import annotations

import bisect
import collections
import functools
import inspect
import itertools
import logging
import struct
import threading
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any, Literal, TypeVar, overload

import equinox as eqx
import jax
import jax.tree_util as jtu

from . import _callable_key, _internals, _program
from ._program import (
    Compiled,
    History,
    Marked,
    WithKeywords,
    call_signature,
    concrete,
    jit_disabled,
    marked_program,
    user_program,
)

_F = TypeVar("_F", bound=Callable[..., Any])
Donate = Literal["all", "all-except-first", "warn", "warn-except-first", "none"]

# What `eqx.is_array` accepts: these leaves are traced, all others hashed.
_ARRAY_TYPES = _internals.EQX_ARRAY_TYPES
_ARRAY_IMPL = _internals.ARRAY_IMPL  # JAX's own arrays: an exact type test is enough
_NOT_ARRAYS = frozenset({*_internals.PYTHON_NUMBERS, str, bytes})
_ONLY_ARRAY_IMPL = frozenset({_ARRAY_IMPL})
_get = object.__getattribute__  # skips Module.__getattribute__ on the hot path
_flatten = jtu.default_registry.flatten  # jtu.tree_flatten without its Python frame
# Equinox's own, also where a program points `eqx.filter_jit` at this one.
_equinox_filter_jit = _internals.equinox_filter_jit()
_callback_logger = logging.getLogger("jax._src.callback")
_DONATE = {  # option -> (filter the unusable-buffer warning, donate first, donate rest)
    "all": (True, True, True),
    "all-except-first": (True, False, True),
    "warn": (False, True, True),
    "warn-except-first": (False, False, True),
    "none": (False, False, False),
}
_UNUSED_DONATION = "Some donated buffers were not usable*"
# Each call's `__equinox_jit_id__` (an `eqx.error_if` trace records the stack up
# to the frame holding that local): equinox uses random bytes, any bytes unique
# per call do. One C call per call: packing a counter's next value.
_next_call_id = map(struct.Struct("<Q").pack, itertools.count()).__next__
# Calls whose callables differ from the tracing call's but trace alike: each
# layout remembers this many of them by their exact key (older ones are found
# again by `SharedKey`, at the cost of one comparison).
_SHARED_CALLS_KEPT = 256
# Equinox's error stacks skip its own frames too.
_internals.hide_from_tracebacks(__file__)


# One entry per `af.filter_jit` call in progress, in any thread (list append and
# pop are atomic, where `+= 1` on a global is not).
_in_flight: list[None] = []


class _QuietCallbackFailures(logging.Filter):
    """Hides JAX's log line for a failed callback while any `af.filter_jit` call is
    in progress: the failure is raised at the call instead.

    Equinox adds such a filter around each of its calls. One filter installed for
    good, reading `_in_flight`, costs a call that cannot fail nothing but a list
    append and pop, and needs no knowledge of which programs call back (a call
    that waits on another thread's trace of a checking program is covered too).
    """

    def __init__(self) -> None:
        super().__init__()
        self._equinox = _internals.CallbackLogFilter()  # its test of the message

    def filter(self, record: logging.LogRecord) -> bool:
        return not _in_flight or bool(self._equinox.filter(record))


_callback_logger.addFilter(_QuietCallbackFailures())


class _Layout:
    """One compiled cache, shared the way `eqx.filter_jit` shares its `jax.jit`.

    Equinox keeps one `jax.jit` per function object (per name for other callables)
    and tells calls apart by their static parts; a `_Layout` is that for one
    `static_fun` and donation layout. `jits` maps `(treedef, static leaves)` to the
    `Compiled` for it, for as long as the layout lives: JAX keeps every trace of
    equinox's `jax.jit` as long, so a structure seen once never traces again.

    Donating calls pass the first argument's leaves apart from the rest, so that
    the donated buffers come in equinox's order (JAX gives an output the first
    donated buffer that fits, so the order decides which input is consumed):
    `(first, fun, rest)`, all donated, for `"all"` and `"warn"`; `(fun, first,
    rest)` with `fun` and `rest` donated for the `"-except-first"` options.
    `fun_at` is where the function's arrays go; None when the function holds no
    arrays (a plain function) and nothing is donated: calls then pass the leaves
    alone, which saves JAX a pytree argument on every call.
    """

    __slots__ = (
        "__weakref__",
        "donate_first",
        "donate_rest",
        "fun_at",
        "jits",
        "share",
        "shared",
        "shared_calls",
        "static_fun",
        "users",
    )

    def __init__(
        self, static_fun: Any, donate_first: bool, donate_rest: bool, share: bool
    ):
        self.static_fun = static_fun
        self.donate_first = donate_first
        self.donate_rest = donate_rest  # every donating option donates the rest
        fun_has_arrays = any(leaf is None for leaf in static_fun[0])
        self.fun_at: int | None = (
            1 if donate_first else 0 if fun_has_arrays or donate_rest else None
        )
        self.jits: dict[tuple, Compiled] = {}
        # With `share_callables`: each traced program by what it traces to, and the
        # exact keys of the calls sharing one (oldest first, at most
        # _SHARED_CALLS_KEPT of them in `jits`).
        self.share = share
        self.shared: dict[
            _callable_key.SharedKey, tuple[_callable_key.SharedKey, Compiled]
        ] = {}
        self.shared_calls: collections.deque[tuple] = collections.deque()
        # The callables that run this layout's programs, as equinox tells them
        # apart (a function by identity, another callable by ==), numbered in
        # the order they came, the layout's own function 0.
        self.users: dict[Any, int] = {static_fun: 0}

    def user_of(self, static_fun: Any) -> int:
        """The number of the caller whose static part is `static_fun` (under
        `_lock`); a second caller makes every program route its calls."""
        number = self.users.get(static_fun)
        if number is None:
            number = self.users[static_fun] = len(self.users)
            if number == 1:
                for compiled in self.jits.values():
                    compiled.route_from_now()
        return number

    def find_or_compile(
        self, treedef: Any, static: tuple, names: tuple[str, str]
    ) -> Compiled:
        """The program for a call whose exact key is not in `jits` (under `_lock`):
        another call's that it traces alike, or a new one."""
        key = (treedef, static)
        found = self.jits.get(key)  # another thread may have compiled it meanwhile
        if found is not None:
            return found
        if not self.share:
            return self.compile(treedef, static, names)
        # The function's globals are read by this trace too: recorded in the key.
        shared_key = _callable_key.SharedKey(treedef, static, self.static_fun)
        tracing = self.shared.get(shared_key)
        if tracing is None:
            program = self.compile(treedef, static, names)
            self.shared[shared_key] = (shared_key, program)
            program.shared_key = shared_key
            return program
        traced_key, program = tracing
        found = program.shared_with(_callable_key.counterparts(traced_key, shared_key))
        self.jits[key] = found
        self.shared_calls.append(key)
        if len(self.shared_calls) > _SHARED_CALLS_KEPT:
            del self.jits[self.shared_calls.popleft()]
        return found

    def compile(
        self,
        treedef: Any,
        static: tuple,
        names: tuple[str, str],
        *,
        register: bool = True,
    ) -> Compiled:
        """A new program for this call structure, kept in `jits` unless it is
        a version traced under rebound globals (see `Compiled.route`)."""
        traced = tuple(i for i, x in enumerate(static) if x is None)
        mixed = len(traced) != len(static)
        compiled = Compiled(traced if mixed else None)
        if self.share:
            compiled.history = History((treedef, static, self.static_fun))
            if len(self.users) > 1 and register:
                compiled.routes = {}
        run = user_program(
            self.static_fun,
            treedef,
            static,
            traced if mixed else None,
            self.fun_at,
            functools.partial(self.traced_again, compiled) if self.share else None,
        )
        # Named before jax.jit sees it: JAX's messages name the function traced.
        run.__name__, run.__qualname__ = names
        # Donating calls always wait, as in equinox.
        flat = marked_program(run, always_wait=self.donate_rest)
        flat.__name__, flat.__qualname__ = names
        donate: tuple[int, ...]
        if self.donate_first:  # flat(first, fun, rest)
            donate = (0, 1, 2)
        elif self.donate_rest:  # flat(fun, first, rest)
            donate = (0, 2)
        else:  # flat(fun, leaves)
            donate = ()
        compiled.jitted = jax.jit(flat, donate_argnums=donate)
        if register:
            self.jits[(treedef, static)] = compiled
        return compiled

    def traced_again(self, compiled: Compiled, call_args: tuple) -> None:
        """Run by every trace of `compiled` (a new shape too): the globals it reads
        go into the program's history, and once one was rebound since its key was
        made, its traces no longer read what a new call would, so no new call
        shares it (nor this layout)."""
        assert compiled.history is not None
        # Read over the same roots as the key's (this call structure, the function).
        now = compiled.history.record(call_args)
        _stop_sharing_if_rebound(self)
        key = compiled.shared_key
        if key is not None and not _callable_key.same_reads(key.reads, now):
            with _lock:
                compiled.shared_key = None
                if self.shared.get(key, (None, None))[1] is compiled:
                    del self.shared[key]


# Layouts by function, then by static part and donation; other callables share one
# entry and are told apart by their static parts. Keyed weakly, but a layout's
# compiled programs refer to the function, so in practice an entry lives as long
# as the process, as equinox's cache of jits does.
_layouts: weakref.WeakKeyDictionary[Any, dict[Any, _Layout]] = (
    weakref.WeakKeyDictionary()
)
# With `share_callables`, layouts also by what their function traces to (and the
# globals it read when its layout was made), so that `af.filter_jit` of a new but
# equal closure or partial (one per field) finds the programs an earlier one
# compiled. These hold the first such function for good.
_shared_layouts: dict[_callable_key.SharedKey, _Layout] = {}
# Each shared layout's key in `_shared_layouts`.
_layout_keys: weakref.WeakKeyDictionary[_Layout, _callable_key.SharedKey] = (
    weakref.WeakKeyDictionary()
)
# Reentrant: a static leaf's __hash__ or __eq__ (user code, run under it by the
# key lookup) may call another filter_jit function.
_lock = threading.RLock()


def _any_callable() -> None:
    """The key for callables that are not plain functions (weakly referenceable)."""


# eqx.clear_caches() forgets equinox's shared jits: wrappers made later trace anew,
# existing ones keep theirs. Forgetting the layouts does the same here.
_internals.register_cache_clear(_layouts.clear)
_internals.register_cache_clear(_shared_layouts.clear)


def _layout_for(
    fun: Any, names: tuple[str, str], static_fun: Any, donate: tuple, share: bool
) -> tuple[_Layout, _Slot]:
    """The layout for a new wrapper of `fun`, and where it is kept (a wrapper
    that moves to another layout moves its function's later wrappers too)."""
    owner = fun if type(fun) is types.FunctionType else _any_callable
    key = (names, static_fun, donate, share)
    with _lock:
        by_key = _layouts.setdefault(owner, {})
        layout = by_key.get(key)
        if layout is None:
            layout = by_key[key] = _shared_layout(names, static_fun, donate, share)
    return layout, (by_key, key)


# Where a function's layout is kept in `_layouts`: its owner's dict, and the key.
_Slot = tuple[dict[Any, "_Layout"], tuple]


def _shared_layout(
    names: tuple[str, str], static_fun: Any, donate: tuple, share: bool
) -> _Layout:
    """A new layout, or with `share` the layout of an equal function (under
    `_lock`)."""
    if not share:
        return _Layout(static_fun, donate[0], donate[1], share)
    leaves, treedef = static_fun
    shared_key = _callable_key.SharedKey(treedef, (*leaves, names, donate))
    layout = _shared_layouts.get(shared_key)
    if layout is None:
        layout = _shared_layouts[shared_key] = _Layout(
            static_fun, donate[0], donate[1], share
        )
        _layout_keys[layout] = shared_key
    return layout


def _stop_sharing_if_rebound(layout: _Layout) -> None:
    """Run by every trace of a layout's programs (a new shape too): if a global its
    function reads was rebound since the layout was made, its programs no longer
    all read what a new equal function would, so later wrappers get their own."""
    key = _layout_keys.get(layout)
    if key is not None and not key.reads_as_now():
        with _lock:
            _layout_keys.pop(layout, None)
            if _shared_layouts.get(key) is layout:
                del _shared_layouts[key]


def _arity(signature: inspect.Signature) -> tuple[int, float]:
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


class _Plan:
    """What a wrapper needs per call, in one object read once (Module attribute
    reads go through `Module.__getattribute__`, which costs on a hot path)."""

    __slots__ = (
        "filter_warning",
        "high",
        "layout",
        "low",
        "names",
        "signature",
        "slot",
        "static_fun",
        "unchecked",
        "user",
    )

    def __init__(self, signature, names, layout, filter_warning, static_fun, slot):
        self.signature: inspect.Signature = signature
        self.low, self.high = _arity(signature)
        self.names: tuple[str, str] = names
        self.layout: _Layout | None = layout  # None: every call goes to equinox
        self.filter_warning: bool = filter_warning
        self.static_fun = static_fun
        self.slot: _Slot | None = slot
        # Whether the layout came from another, equal function: its programs were
        # traced under the globals of then, which the first call checks (see
        # `_own_layout`).
        self.unchecked = layout is not None and layout.static_fun != static_fun
        # Which of its layout's callers this wrapper's function is (see
        # `_Layout.users`); decided with the layout, at the first call.
        self.user = 0

    # A static field of the wrapper, so part of its tree structure: two wrappers
    # of one function must compare equal, as two `eqx.filter_jit` wrappers do.
    def _key(self) -> tuple:
        return (self.names, self.layout, self.filter_warning, self.signature)

    def __eq__(self, other: object) -> bool:
        return type(other) is _Plan and self._key() == other._key()

    def __hash__(self) -> int:
        # Not the layout: a wrapper's first call may give it a layout of its own.
        return hash((self.names, self.filter_warning))


def _own_layout(plan: _Plan) -> _Layout:
    """The layout a wrapper's first call runs, when its function shares another's.

    Under `eqx.filter_jit` a new function traces anew at its first call and reads
    the globals of then. The shared layout's programs were traced under the
    globals read when it was made: if one has been rebound since, this wrapper
    gets a layout of its own (shared with later equal functions), and no longer
    compares equal to the wrappers that keep the old one."""
    with _lock:
        layout = plan.layout
        assert layout is not None and plan.slot is not None
        if plan.unchecked:
            by_key, slot_key = plan.slot
            moved = by_key.get(slot_key)
            if moved is not None and moved is not layout:
                # Another wrapper of this function moved: its traces are there,
                # and equinox shares them between wrappers of one function.
                plan.layout = layout = moved
            elif plan.static_fun not in layout.users:  # else it has traces here
                key = _layout_keys.get(layout)
                if key is None or not key.reads_as_now():
                    if key is not None and _shared_layouts.get(key) is layout:
                        del _shared_layouts[key]
                        del _layout_keys[layout]
                    donate = (layout.donate_first, layout.donate_rest)
                    plan.layout = layout = _shared_layout(
                        plan.names, plan.static_fun, donate, layout.share
                    )
                    by_key[slot_key] = layout
            plan.user = layout.user_of(plan.static_fun)
            plan.unchecked = False
        return layout


def _call(wrapper: _FilterJit, /, *args: Any, **kwargs: Any) -> Any:
    """A wrapper's call (its `__call__`: one Python frame less on every step)."""
    __tracebackhide__ = True
    # A trace records the stack up to the frame holding this local (eqx.error_if).
    __equinox_jit_id__ = _next_call_id()
    plan: _Plan = _get(wrapper, "_plan")
    layout = plan.layout
    if layout is None:
        return _call_equinox(_get(wrapper, "_fallback"), args, kwargs)
    if plan.unchecked:
        layout = _own_layout(plan)
    if kwargs or not plan.low <= len(args) <= plan.high:
        bound = plan.signature.bind(*args, **kwargs)
        args, kwargs = bound.args, bound.kwargs
    leaves, treedef = _flatten(WithKeywords((args, kwargs)) if kwargs else args)
    # What the cache key holds of each leaf: None for arrays, else the leaf. A tree
    # of JAX arrays only is told by one pass in C; JAX's arrays and Python's
    # numbers, the common leaves, skip the slower isinstance.
    if _ONLY_ARRAY_IMPL.issuperset(map(type, leaves)):
        static = (None,) * len(leaves)
    else:
        static = tuple(
            [
                None
                if type(x) is _ARRAY_IMPL
                else x
                if type(x) in _NOT_ARRAYS or not isinstance(x, _ARRAY_TYPES)
                else None
                for x in leaves
            ]
        )
    try:
        compiled = layout.jits.get((treedef, static))
    except Exception as error:
        try:
            hash(static)
        except Exception:  # an unhashable static leaf: equinox raises its own error
            return _call_equinox(_get(wrapper, "_fallback"), args, kwargs)
        # Hashable, but == raised against a cached key (JAX's ValueError for it).
        raise ValueError(
            f"{plan.names[1]}: a non-array argument raised when compared with == "
            "to one of an earlier call. filter_jit hashes non-array arguments into "
            "its cache key and compares them with ==, so both must work."
        ) from error
    if compiled is None:
        with _lock:  # one jax.jit per key, also when threads race to the first call
            compiled = layout.find_or_compile(treedef, static, plan.names)
    traced = compiled.traced
    if traced is not None:
        leaves = [leaves[i] for i in traced]
    if layout.fun_at is None:  # see `_Layout`
        call_args: tuple = (leaves,)
    elif layout.donate_rest:  # the first argument's leaves apart (see `_Layout`)
        n_first = len(jtu.tree_leaves(args[0])) if args else 0
        if traced is not None:  # the traced leaves among the first n_first
            n_first = bisect.bisect_left(traced, n_first)
        first, rest = leaves[:n_first], leaves[n_first:]
        dynamic_fun = _get(_get(wrapper, "_fallback"), _internals.DYNAMIC_FUN)
        if layout.fun_at:
            call_args = (first, dynamic_fun, rest)
        else:
            call_args = (dynamic_fun, first, rest)
    else:
        call_args = (_get(_get(wrapper, "_fallback"), _internals.DYNAMIC_FUN), leaves)
    if compiled.routes is not None and not jit_disabled():  # several callables
        compiled = _routed(compiled, plan, layout, treedef, static, call_args)
    _in_flight.append(None)  # see `_QuietCallbackFailures`
    try:
        if plan.filter_warning:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=_UNUSED_DONATION)
                result = compiled.jitted(*call_args)
        else:
            result = compiled.jitted(*call_args)
        if type(result) is Marked:
            marker = result.parts[0]
            # Errors from eqx.error_if surface here, at the call, as with
            # eqx.filter_jit.
            if marker is not None and concrete(marker):
                marker.block_until_ready()
    except (_internals.JaxRuntimeError, ValueError) as error:
        try:
            _internals.raise_equinox_error(error, __equinox_jit_id__)
        except _internals.EquinoxRuntimeError as equinox_error:
            equinox_error.__traceback__ = None  # as equinox: the re-raise is noise
            raise
        raise
    finally:
        _in_flight.pop()
    if type(result) is not Marked:  # the output, arrays only
        return result if compiled.pairs is None else compiled.own_output(result)
    _, arrays, others = result.parts
    if others is None:
        # JAX rebuilt the output from the trace's tree: a call sharing another
        # call's program puts its own static fields back in.
        return arrays if compiled.pairs is None else compiled.own_output(arrays)
    # Non-array outputs: the objects this trace returned, as equinox gives them
    # (with this call's own objects where it shares another call's program).
    out_tree, values = compiled.own_outputs(others.value)
    return jtu.tree_unflatten(
        out_tree, [x if v is None else v for x, v in zip(arrays, values, strict=True)]
    )


def _routed(
    compiled: Compiled,
    plan: _Plan,
    layout: _Layout,
    treedef: Any,
    static: tuple,
    call_args: tuple,
) -> Compiled:
    """The program a call runs when several callables share `compiled`: the one
    its own callable's calls with this signature ran before, as if it had a
    cache of its own (see `Compiled.route`)."""
    routes = compiled.routes
    assert routes is not None
    key = (plan.user, call_signature(call_args))
    chosen = routes.get(key)
    if chosen is None:
        with _lock:
            chosen = routes.get(key)
            if chosen is None:
                chosen = compiled.route(
                    *key,
                    lambda: layout.compile(treedef, static, plan.names, register=False),
                )
    return chosen


def _call_equinox(fallback: Any, args: tuple, kwargs: dict) -> Any:
    __tracebackhide__ = True
    try:
        return _internals.call_unwatched(fallback, args, kwargs)
    except _internals.EquinoxRuntimeError as error:
        error.__traceback__ = None  # as equinox: the re-raise line is noise
        raise


def _same_layout(a: _Layout, b: _Layout, same: Callable[[Any, Any], bool]) -> bool:
    return (
        (a.donate_first, a.donate_rest, a.share)
        == (b.donate_first, b.donate_rest, b.share)
    ) and same(a.static_fun, b.static_fun)


def _same_plan(a: _Plan, b: _Plan, same: Callable[[Any, Any], bool]) -> bool:
    if (a.names, a.filter_warning, a.signature) != (
        b.names,
        b.filter_warning,
        b.signature,
    ):
        return False
    if a.layout is None or b.layout is None:
        return a.layout is b.layout
    return same(a.layout, b.layout)


# An af.filter_jit wrapper held by a scene: equal ones (wrapping equal functions
# with the same options) trace the same program.
_callable_key.register(
    _Layout,
    _same_layout,
    lambda layout: hash((layout.donate_first, layout.share)),
    lambda layout: (layout.static_fun,),
)
_callable_key.register(
    _Plan,
    _same_plan,
    lambda plan: hash(plan.names),
    lambda plan: () if plan.layout is None else (plan.layout,),
)


def shares_callables(fn: Any) -> bool:
    """Whether `fn` is an `af.filter_jit` wrapper that keys callables by what they
    trace to (`share_callables=True`, and not passed whole to equinox)."""
    if type(fn) is not _FilterJit:
        return False
    layout = _get(fn, "_plan").layout
    return layout is not None and layout.share


class _FilterJit(eqx.Module):
    # The eqx.filter_jit wrapper: its leaves (the function's arrays) are this one's.
    _fallback: Any
    _plan: _Plan = eqx.field(static=True, repr=False)
    # What explain_retraces groups calls by: the layout, or the fallback's jax.jit.
    _cached: Any = eqx.field(static=True, repr=False)

    @property
    def __wrapped__(self) -> Any:
        return self._fallback.__wrapped__

    def __repr__(self) -> str:
        return f"af.filter_jit({self._fallback.fn})"

    __call__ = _call

    def lower(self, /, *args: Any, **kwargs: Any) -> Any:
        """`jax.jit(...).lower` for these arguments, exactly as `eqx.filter_jit`."""
        return self._fallback.lower(*args, **kwargs)

    def __get__(self, instance: Any, owner: Any) -> Any:
        del owner
        if instance is None:
            return self
        return eqx.Partial(self, instance)


# `explain_retraces` watches these calls as it watches eqx.filter_jit's.
_internals.watch_jit_class(_FilterJit, __file__, _program.__file__)


@overload
def filter_jit(
    *, donate: Donate = "none", share_callables: bool = True
) -> Callable[[_F], _F]: ...


@overload
def filter_jit(
    fun: _F, *, donate: Donate = "none", share_callables: bool = True
) -> _F: ...


def filter_jit(
    fun: Any = None,
    *,
    donate: Donate = "none",
    share_callables: bool = True,
    **jitkwargs: Any,
) -> Any:
    """`eqx.filter_jit` with less per-call overhead: a drop-in replacement.

    Same rules as `eqx.filter_jit`: JAX and NumPy arrays are traced, every other
    leaf is static and part of the cache key by value; outputs that are not arrays
    come back as the objects the trace produced; `donate`, methods (`__get__`),
    `.lower(...)` and runtime errors from `eqx.error_if` work as in equinox, and
    a call retraces exactly when `eqx.filter_jit` would. The difference is the
    per-call cost: the arguments are flattened once and the `jax.jit` compiled for
    their structure and static leaves is called directly. For a model of
    `af.ArrayModule`s (arrays, and static fields in the structure) a small step
    then takes about a third of `eqx.filter_jit`'s time, within 20% of a
    hand-written `jax.jit` (the Performance page has the measurements).
    Calls it cannot reproduce exactly (extra `jax.jit` options, unhashable static
    leaves) are passed to `eqx.filter_jit`.

    One difference in keying, on by default: callables among the leaves and static
    fields are compared by what they trace to, not by identity. Scenes built one
    per field each hold a new `functools.partial(step_size, 0.1)`, `lambda x: x`
    or bound method, which `eqx.filter_jit` compiles the step again for;
    `af.filter_jit` shares one program among them when they are partials of equal
    functions with equal arguments, functions with the same code, globals and
    equal defaults and captured values, bound methods of equal objects, or
    `jax.jit`s of equal functions with the same options (the function given to
    `af.filter_jit` is compared the same way), and only while every module
    global their code reads holds an equal value: a global rebound since a
    program was traced gives a new callable a trace of its own, as in equinox.
    "Equal" for a captured or bound value is strict (identical, or the same type
    and `==`); arrays, lists, dicts and objects without value equality compare
    by identity, so two callables that could trace differently are never
    merged. Results are the same; only the number of compiles drops.
    `share_callables=False` keys them as equinox does.

    One thing is left out on purpose: `eqx.filter_jit` waits for every call to
    finish, so that a failing `eqx.error_if` raises at the call. `af.filter_jit`
    waits only where that can matter, for programs that call back into Python
    (`eqx.error_if`, `jax.debug.print`, callbacks) or donate buffers; the others
    return once dispatched, like `jax.jit`, so the next step's Python overlaps
    this step's computation. Results are the same; only when the call returns
    differs (time it with `jax.block_until_ready`). A failure no callback reports
    (the device running out of memory mid-program, say) then surfaces where the
    result is first used, as with `jax.jit`, rather than at the call.

    **Arguments:**

    - `fun`: the function (or callable Module) to compile. Omit it to get a
        decorator: `@af.filter_jit(donate="all")`.
    - `donate`: `"all"`, `"all-except-first"`, `"warn"`, `"warn-except-first"` or
        `"none"` (the default), as for `eqx.filter_jit`.
    - `share_callables`: compare callables by what they trace to (the default),
        or by identity as `eqx.filter_jit` does (`False`). Sharing needs equinox
        0.13 or later (and a JAX whose `jax.jit` objects show what they wrap);
        on older versions callables are keyed as `eqx.filter_jit` keys them.

    **Returns:** the compiled version of `fun`.

    !!! example

        ```python
        import jax
        from jaxtyping import Array, Float
        import arrayfield as af

        class Scene(af.ArrayModule):
            flux: Float[Array, ""]  # Scene(flux=1.0) stores an array
            name: str = af.field(static=True, default="galaxy")

        traces = []

        @af.filter_jit
        def step(scene, rate):
            traces.append(scene.name)  # runs only while tracing
            return jax.tree_util.tree_map(lambda x: x + rate, scene), "stepped"

        scene = Scene(flux=1.0)
        for _ in range(3):
            scene, note = step(scene, 0.5)  # 0.5 is hashed, as in eqx.filter_jit
        assert float(scene.flux) == 2.5 and note == "stepped"
        assert traces == ["galaxy"]  # one trace for the three steps
        ```
    """
    if fun is None:
        return functools.partial(
            filter_jit, donate=donate, share_callables=share_callables, **jitkwargs
        )
    if donate not in _DONATE:
        _equinox_filter_jit(fun, donate=donate)  # raises equinox's error for it
    fallback = _equinox_filter_jit(fun, donate=donate, **jitkwargs)
    filter_warning, donate_first, donate_rest = _DONATE[donate]
    signature = inspect.signature(fun)
    names = _internals.fn_names(fun)
    static_fun = _internals.static_fun_of(fallback)
    layout: _Layout | None = None
    slot: _Slot | None = None
    if not jitkwargs:
        try:
            hash(static_fun)
        except Exception:
            pass  # equinox raises when called: every call goes to it
        else:
            share = share_callables and _callable_key.SUPPORTED
            layout, slot = _layout_for(
                fun, names, static_fun, (donate_first, donate_rest), share
            )
    wrapper = _FilterJit(
        _fallback=fallback,
        _plan=_Plan(signature, names, layout, filter_warning, static_fun, slot),
        _cached=_internals.cache_of(fallback) if layout is None else layout,
    )
    return eqx.module_update_wrapper(wrapper)
