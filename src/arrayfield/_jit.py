"""`af.filter_jit`: `eqx.filter_jit`'s semantics with a shorter path to `jax.jit`.

`eqx.filter_jit` rebuilds three partitioned pytrees and a donation dictionary on
every call before `jax.jit` hashes them again. This wrapper flattens the arguments
once, keys a dictionary of `jax.jit`s by exactly what equinox's cache key holds
(the tree structure, which carries static fields, and every non-array leaf by
value), and calls that `jax.jit` with the array leaves. Everything else it cannot
reproduce exactly (jit options, unhashable static leaves, `.lower`) goes to an
`eqx.filter_jit` wrapper, built the first time such a call comes (the function
is split into its arrays and the rest as equinox splits it, with public calls).

So every call traces exactly when `eqx.filter_jit` would. What a trace produced is
then compared with the programs this process compiled before
(`_executables.executable_for`): where it is the same program (a field whose scene
differs in identity-compared helpers, a new wrapper per `fit()`), the executable
compiled before runs it, and only the XLA compile is saved.

What each compiled program is (the user's function on flat leaves, the marker a
call waits on) lives in `_program`; this module picks the program and calls it.
"""

from __future__ import annotations

import bisect
import functools
import inspect
import itertools
import logging
import struct
import warnings
from collections.abc import Callable
from typing import Any, Literal, TypeVar, overload

import equinox as eqx
import jax
import jax.tree_util as jtu

from . import (
    _aot,
    _eqx_private,
    _facts,
    _hooks,
    _jax_private,
    _layouts,
    _program,
    _tracing,
)
from ._env import DEFAULT_RETRACE_LIMIT, RETRACE_LIMIT, env_count
from ._executables import OtherSignature
from ._program import (
    Compiled,
    Marked,
    WithKeywords,
    arity,
    call_checks_on,
    call_signature,
    concrete,
)

_F = TypeVar("_F", bound=Callable[..., Any])
Donate = Literal["all", "all-except-first", "warn", "warn-except-first", "none"]

# `_eqx_private.is_traced_leaf`, inlined on the hot path: these leaves are traced,
# all others hashed.
_ARRAY_TYPES = _eqx_private.EQX_ARRAY_TYPES or (jax.Array,)  # None: dispatch is off
_ARRAY_IMPL = _jax_private.ARRAY_IMPL  # JAX's own arrays: an exact type test is enough
_NUMBERS = frozenset(_facts.PYTHON_NUMBERS)
_NOT_ARRAYS = frozenset({*_NUMBERS, str, bytes})
_ONLY_ARRAY_IMPL = frozenset({_ARRAY_IMPL})
_get = object.__getattribute__  # skips Module.__getattribute__ on the hot path
_flatten = jtu.default_registry.flatten  # jtu.tree_flatten without its Python frame
# Equinox's own, also where a program points `eqx.filter_jit` at this one.
_equinox_filter_jit = _eqx_private.equinox_filter_jit()
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
# Whether a call runs at the top level, with jit on (`Compiled.runs`' calls).
_TOP_LEVEL: tuple[Any, Any, Any, Any] = _jax_private.TOP_LEVEL_STATE or (
    None,
    None,
    None,
    None,
)
_TRACE, _EVAL_TRACE, _AXES, _TOP_AXES = _TOP_LEVEL
_DISABLE_JIT = _jax_private.DISABLE_JIT
_trace_context = _jax_private.trace_context
_static_now = _program.static_now
# How many new keys a Python number may make for one function before it warns
# (`_count_number_retrace`; read once, at import; 0: never).
_RETRACE_LIMIT = env_count(RETRACE_LIMIT, DEFAULT_RETRACE_LIMIT)
# Equinox's error stacks skip its own frames too.
_jax_private.hide_from_tracebacks(__file__)


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
        self._equinox = _eqx_private.CallbackLogFilter()  # its test of the message

    def filter(self, record: logging.LogRecord) -> bool:
        return not _in_flight or bool(self._equinox.filter(record))


_callback_logger.addFilter(_QuietCallbackFailures())


class _Plan:
    """What a wrapper needs per call, in one object read once (Module attribute
    reads go through `Module.__getattribute__`, which costs on a hot path)."""

    __slots__ = (
        "equinox",
        "filter_warning",
        "high",
        "layout",
        "low",
        "names",
        "options",
        "signature",
        "static_fun",
    )

    def __init__(self, signature, names, layout, filter_warning, static_fun, options):
        self.signature: inspect.Signature = signature
        self.low, self.high = arity(signature)
        self.names: tuple[str, str] = names
        self.layout: _layouts.Layout | None = layout  # None: every call goes to equinox
        self.filter_warning: bool = filter_warning
        # This wrapper's own static part: equal to its layout's, maybe not it.
        self.static_fun = static_fun
        # `eqx.filter_jit`'s keywords, and the wrapper it last built from them:
        # `(the function's arrays it was built for, the eqx.filter_jit wrapper)`.
        self.options: dict[str, Any] = options
        self.equinox: tuple[Any, Any] | None = None

    # A static field of the wrapper, so part of its tree structure: two wrappers
    # of one function must compare equal, as two `eqx.filter_jit` wrappers do.
    def _key(self) -> tuple:
        return (self.names, self.layout, self.filter_warning, self.signature)

    def __eq__(self, other: object) -> bool:
        return type(other) is _Plan and self._key() == other._key()

    def __hash__(self) -> int:
        return hash((self.names, self.filter_warning))


def _call(wrapper: _FilterJit, /, *args: Any, **kwargs: Any) -> Any:
    """A wrapper's call (its `__call__`: one Python frame less on every step)."""
    __tracebackhide__ = True
    # A trace records the stack up to the frame holding this local (eqx.error_if).
    __equinox_jit_id__ = _next_call_id()
    plan: _Plan = _get(wrapper, "_plan")
    layout = plan.layout
    if layout is None:
        return _call_equinox(_equinox(wrapper), args, kwargs)
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
            return _call_equinox(_equinox(wrapper), args, kwargs)
        # Hashable, but == raised against a cached key (JAX's ValueError for it).
        raise ValueError(
            f"{plan.names[1]}: a non-array argument raised when compared with == "
            "to one of an earlier call. filter_jit hashes non-array arguments into "
            "its cache key and compares them with ==, so both must work."
        ) from error
    if compiled is None:
        compiled, previous = layout.add(treedef, static, plan.names)
        if previous is not None and _RETRACE_LIMIT and not layout.warned:
            _count_number_retrace(
                wrapper, layout, treedef, previous, static, leaves, (args, kwargs)
            )
    traced = compiled.traced
    if traced is not None:
        leaves = [leaves[i] for i in traced]
    if layout.fun_at is None:  # see `_layouts.Layout`
        call_args: tuple = (leaves,)
    elif (
        layout.donate_rest
    ):  # the first argument's leaves apart (see `_layouts.Layout`)
        n_first = len(jtu.tree_leaves(args[0])) if args else 0
        if traced is not None:  # the traced leaves among the first n_first
            n_first = bisect.bisect_left(traced, n_first)
        first, rest = leaves[:n_first], leaves[n_first:]
        dynamic_fun = _get(wrapper, "_dynamic_fun")
        if layout.fun_at:
            call_args = (first, dynamic_fun, rest)
        else:
            call_args = (dynamic_fun, first, rest)
    else:
        call_args = (_get(wrapper, "_dynamic_fun"), leaves)
    run = compiled.jitted
    signature: tuple = ()
    fast = None
    if (
        not compiled.direct
        and _TRACE.value is _EVAL_TRACE
        and _AXES.value is _TOP_AXES
        and not _DISABLE_JIT.value
    ):
        fast = compiled.fast
        if fast is not None and (fast[0] != _trace_context() or call_checks_on()):
            fast = None
        if fast is not None:
            run = fast[1]  # a generalised program: it checks the call itself
        else:
            # Which executable: by the signature, as `jax.jit` picks one (see
            # `Compiled.runner`); under a transformation, `jax.jit` is traced
            # into it.
            signature = call_signature(
                leaves if layout.fun_at is None else jtu.tree_leaves(call_args)
            )
            last = compiled.last  # the common case: as the call before
            if last is not None and last[0] == signature:
                run = last[1]
            else:
                runs = compiled.runs  # not direct: sharing is on, so it exists
                run = runs.get(signature)  # pyright: ignore[reportOptionalMemberAccess]
                if run is not None:
                    compiled.last = (signature, run)
            if run is not None and run is not compiled.jitted and call_checks_on():
                run = compiled.jitted  # see `call_checks_on`: jax.jit's own call
    if run is compiled.jitted:  # it may trace: with this call's own static parts
        if layout.mixed:
            _static_now.fun = (layout.static_fun, plan.static_fun)
        if traced is not None:
            _static_now.leaves = static
    _in_flight.append(None)  # see `_QuietCallbackFailures`
    try:
        if run is None:
            run = _runner(compiled, call_args, signature, static, layout, plan)
            if run is not compiled.jitted and call_checks_on():
                run = compiled.jitted  # traced already, with this call's statics
        try:
            if plan.filter_warning:
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message=_UNUSED_DONATION)
                    result = run(*call_args)
            else:
                result = run(*call_args)
        except OtherSignature:
            if fast is None:
                raise
            # Another signature than the structure's first: from now on, the
            # signature picks each call's run (no fast path to miss again).
            compiled.fast = None
            return _call(wrapper, *args, **kwargs)
        if type(result) is Marked:
            marker = result.parts[0]
            # Errors from eqx.error_if surface here, at the call, as with
            # eqx.filter_jit.
            if marker is not None and concrete(marker):
                marker.block_until_ready()
    except (_eqx_private.JaxRuntimeError, ValueError) as error:
        try:
            _eqx_private.raise_equinox_error(error, __equinox_jit_id__)
        except _eqx_private.EquinoxRuntimeError as equinox_error:
            equinox_error.__traceback__ = None  # as equinox: the re-raise is noise
            raise
        raise
    finally:
        _in_flight.pop()
    if type(result) is not Marked:  # the output, arrays only
        return result
    _, arrays, others = result.parts
    if others is None:
        return arrays
    # Non-array outputs: the objects this trace returned, as equinox gives them.
    out_tree, values = others.value
    return jtu.tree_unflatten(
        out_tree, [x if v is None else v for x, v in zip(arrays, values, strict=True)]
    )


def _count_number_retrace(
    wrapper: _FilterJit,
    layout: _layouts.Layout,
    treedef: Any,
    previous: tuple,
    static: tuple,
    leaves: list,
    call: tuple,
) -> None:
    """A new key: count it if a Python number made it (it differs from
    `previous`, `(treedef, static leaves)` of the newest earlier key of the same
    structure, in a number a static field holds or in a non-array leaf where
    either is a number); from the `_RETRACE_LIMIT`-th on, warn once for the
    layout, explained by the diagnostics (`_hooks`) from this call and the one
    before. Not for a
    call an `explain_retraces` block or decorator (or
    ARRAYFIELD_EXPLAIN_RETRACES=1) watches, in this thread: it explains each
    retrace already; another thread's unwatched call still warns. Callables and
    objects compared by identity do not count: a jitted function of functions
    traces per function by design, and `af.filter_jit` shares the compiles of
    such traces."""
    old_treedef, old_static = previous
    # Treedefs with one shape apart from numbers (`number_free`) differ only there.
    if old_treedef == treedef and not any(
        (type(a) in _NUMBERS or type(b) in _NUMBERS) and (type(a), a) != (type(b), b)
        for a, b in zip(old_static, static, strict=True)
    ):
        return
    layout.number_retraces += 1
    if layout.number_retraces < _RETRACE_LIMIT or _tracing.record.watched:
        return
    layout.warned = True
    explain = _hooks.explain_static_retraces
    if explain is None:
        return
    # The call before: this call's arrays, the earlier key's other leaves.
    tree = jtu.tree_unflatten(
        old_treedef,
        [x if s is None else s for x, s in zip(leaves, old_static, strict=True)],
    )
    old = tree.parts if type(tree) is WithKeywords else (tree, {})
    explain(wrapper, old, call, layout.number_retraces, layout.numbers)


def _runner(
    compiled: Compiled,
    call_args: tuple,
    signature: tuple,
    static: tuple,
    layout: _layouts.Layout,
    plan: _Plan,
) -> Any:
    """What runs a signature new to `compiled`: traced now, with this call's own
    static parts (`_program.static_now`), then shared or compiled."""
    __tracebackhide__ = True
    # No lock: a trace runs user code, which may wait on another thread's trace
    # (JAX traces a jitted function once for given argument types). Threads that
    # meet a new signature at once may each trace it, as `jax.jit`'s may; its
    # program compiles once (`_executables.executable_for`).
    _static_now.leaves = static
    _static_now.fun = (layout.static_fun, plan.static_fun)
    if not plan.filter_warning:
        return compiled.runner(call_args, signature)
    with warnings.catch_warnings():  # JAX warns as it compiles
        warnings.filterwarnings("ignore", message=_UNUSED_DONATION)
        return compiled.runner(call_args, signature)


def _split(fun: Any) -> tuple[tuple, tuple]:
    """`fun` as `eqx.filter_jit` splits it: its arrays (None elsewhere), and
    `(its other leaves, its treedef)`, the hashable part a cache key holds."""
    leaves, treedef = jtu.tree_flatten(fun)
    arrays = tuple(x if eqx.is_array(x) else None for x in leaves)
    others = tuple(None if eqx.is_array(x) else x for x in leaves)
    return arrays, (others, treedef)


def _joined(arrays: tuple, static_fun: tuple) -> Any:
    others, treedef = static_fun
    leaves = [a if s is None else s for a, s in zip(arrays, others, strict=True)]
    return jtu.tree_unflatten(treedef, leaves)


def _equinox(wrapper: _FilterJit) -> Any:
    """The `eqx.filter_jit` wrapper that stands for `wrapper`, for the calls
    `af.filter_jit` hands to equinox. Built when first needed and kept while
    the function's arrays stay the same objects; a new one shares equinox's
    traces (equinox keeps one `jax.jit` per function name and options)."""
    plan: _Plan = _get(wrapper, "_plan")
    arrays = _get(wrapper, "_dynamic_fun")
    built = plan.equinox
    if built is None or built[0] is not arrays:
        fun = _joined(arrays, plan.static_fun)
        built = plan.equinox = (arrays, _equinox_filter_jit(fun, **plan.options))
    return built[1]


def _call_equinox(fallback: Any, args: tuple, kwargs: dict) -> Any:
    __tracebackhide__ = True
    try:
        return _eqx_private.call_unwatched(fallback, args, kwargs)
    except _eqx_private.EquinoxRuntimeError as error:
        error.__traceback__ = None  # as equinox: the re-raise line is noise
        raise


class _FilterJit(eqx.Module):
    # The function's qualified name: a leaf, as in eqx.filter_jit's wrapper, so
    # that both wrappers of a function flatten to the same leaves.
    fn: str
    # The function as `_split` splits it (as eqx.filter_jit's wrapper holds it):
    # its arrays are this wrapper's leaves, the rest is in its tree structure.
    _dynamic_fun: tuple
    _static_fun: Any = eqx.field(static=True, repr=False)
    _plan: _Plan = eqx.field(static=True, repr=False)
    # What explain_retraces groups calls by: the layout, or equinox's jax.jit.
    _cached: Any = eqx.field(static=True, repr=False)

    @property
    def __wrapped__(self) -> Any:
        return _joined(self._dynamic_fun, self._static_fun)

    def __repr__(self) -> str:
        return f"af.filter_jit({self.fn})"

    __call__ = _call

    def trace(self, /, *args: Any, **kwargs: Any) -> _aot.Traced:
        """The function's program for these arguments (arrays, or
        `jax.ShapeDtypeStruct` specs of them), without compiling: `.jaxpr`,
        `.out_info`, and `.lower()`, as `.lower(...)`."""
        args, kwargs = _aot.specs_as_arrays((args, kwargs), f"{self!r}.trace")
        return _aot.Traced(self, args, kwargs)

    def lower(self, /, *args: Any, **kwargs: Any) -> _aot.Lowered:
        """`eqx.filter_jit(...).lower` for these arguments (arrays, or
        `jax.ShapeDtypeStruct` specs of them), whose `.compile()` checks that
        each call has the static part it was lowered for. It is the field's own
        program, also with `share_numbers=True`: one program for every field
        of a family is `af.export_family`'s."""
        args, kwargs = _aot.specs_as_arrays((args, kwargs), f"{self!r}.lower")
        lowered = _equinox(self).lower(*args, **kwargs)
        return _aot.Lowered(lowered, self._plan.signature, args, kwargs)

    def eval_shape(self, /, *args: Any, **kwargs: Any) -> Any:
        """The output's shapes and dtypes (`jax.ShapeDtypeStruct`s, other
        leaves as the trace returns them) without compiling: as
        `eqx.filter_eval_shape` of the function."""
        return eqx.filter_eval_shape(self.__wrapped__, *args, **kwargs)

    def __get__(self, instance: Any, owner: Any) -> Any:
        del owner
        if instance is None:
            return self
        return eqx.Partial(self, instance)


# `explain_retraces` watches these calls as it watches eqx.filter_jit's.
_eqx_private.watch_jit_class(_FilterJit, __file__, _program.__file__)


@overload
def filter_jit(
    *,
    donate: Donate = "none",
    share_compiles: bool = True,
    share_numbers: bool = False,
    share_offsets: bool = False,
) -> Callable[[_F], _F]: ...


@overload
def filter_jit(
    fun: _F,
    *,
    donate: Donate = "none",
    share_compiles: bool = True,
    share_numbers: bool = False,
    share_offsets: bool = False,
) -> _F: ...


def filter_jit(
    fun: Any = None,
    *,
    donate: Donate = "none",
    share_compiles: bool = True,
    share_numbers: bool = False,
    share_offsets: bool = False,
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

    One difference, on by default: compiles are shared. Every call traces
    exactly when `eqx.filter_jit` would (callables and other static leaves are
    keyed by `==`, as in equinox), and the program a new trace produced is then
    compared with those this process compiled before, by any wrapper: where it
    is the same program, equation for equation, with the same constants and
    options, the executable compiled then runs it. A job that builds one scene
    per field, each with its own helpers, `functools.partial`s or lambdas, or a
    `fit()` that makes a new jitted step per call, so traces again per field but
    compiles once. Results, trace counts and trace-time effects are those of
    `eqx.filter_jit`; only XLA compiles are saved. `share_compiles=False`
    compiles every trace, as equinox does.

    One thing is left out on purpose: `eqx.filter_jit` waits for every call to
    finish, so that a failing `eqx.error_if` raises at the call. `af.filter_jit`
    waits only where that can matter, for programs that call back into Python
    (`eqx.error_if`, `jax.debug.print`, callbacks) or donate buffers; the others
    return once dispatched, like `jax.jit`, so the next step's Python overlaps
    this step's computation. Results are the same; only when the call returns
    differs (time it with `jax.block_until_ready`). A failure no callback reports
    (the device running out of memory mid-program, say) then surfaces where the
    result is first used, as with `jax.jit`, rather than at the call.

    Ahead of time, `.lower(...)` also takes `jax.ShapeDtypeStruct` specs where
    arrays go (what `eqx.filter_eval_shape` returns; equinox would take a spec
    for a static value), and `.eval_shape(...)` gives the output's shapes and
    dtypes without compiling. One check equinox does not make:
    `af.filter_jit(f).lower(...).compile()`
    returns a step that runs only calls with the static part it was compiled
    for (the tree structure, static fields, Python numbers and their types).
    Equinox's compiled step passes the arrays of any call to the executable and
    drops the rest, so a step compiled for one field and called with another
    field's static `origin` returns that field's data computed at the first
    field's origin, silently. Here that call raises a `TypeError` naming the
    first argument or field that differs (`box.origin is 2 where it was 1`);
    a call with the same static part returns bitwise what the wrapper's live
    call returns. Arrays of another shape or dtype are JAX's to refuse.

    **Arguments:**

    - `fun`: the function (or callable Module) to compile. Omit it to get a
        decorator: `@af.filter_jit(donate="all")`.
    - `donate`: `"all"`, `"all-except-first"`, `"warn"`, `"warn-except-first"` or
        `"none"` (the default), as for `eqx.filter_jit`.
    - `share_compiles`: run one executable for traces that are the same program
        (the default), or compile each trace as `eqx.filter_jit` does (`False`).
        Sharing needs a JAX whose traced `jax.jit`s show their jaxpr and
        options (0.5 or later); on older versions every trace compiles.
    - `share_numbers`: also run one program for traces that differ only in
        the numbers they embed: a Python number that became a literal of the
        program (`centre - origin` with an int `origin`), the start of a slice
        or of a block placed into an array (sources at per-field origins,
        `frame.at[oy:oy + h, ox:ox + w].add(box)`), or a constant array it
        captures (each field's data, closed over). A family is every program
        equal to another but for those numbers. Its first trace compiles its
        own program, exactly as without the option; the second compiles one
        that takes the numbers in which it differs from the first (and the
        constants) as inputs, keeping the others literals; every later trace
        that differs only there runs it, compiling nothing (one that differs
        in a number kept a literal compiles it once more, wider). With
        `af.use_compile_cache`, which numbers a family takes is kept beside
        the cache: a later process shares from the family's first field on,
        reading the shared program, and compiles nothing. Off by default,
        because it is not exact from a family's second trace on: XLA
        folds constants into the operations that read them and cannot fold an
        input, so results may differ from `eqx.filter_jit`'s in the last bits:
        integers exact, float32 and float64 within 1e-5 of each output's
        largest value, float16 and bfloat16 within 8 units in its last place,
        except where the output amplifies a last-bit difference (cancelling
        sums, ill-conditioned functions, jumps); the Many fields page states
        the bound and what is never lifted.
        Shapes, loop bounds and branch indices are never shared: a box of
        another size is another family. Its price, measured at the top of the
        Many fields page: a family compiles twice, the second program more
        slowly, and later steps run a little slower than on the field's own
        program, so it gains nothing where most fields start a family of their
        own, and loses on very long fits.
    - `share_offsets`: the former name of `share_numbers` (deprecated; it now
        shares every embedded number, not only integer offsets).

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
            filter_jit,
            donate=donate,
            share_compiles=share_compiles,
            share_numbers=share_numbers,
            share_offsets=share_offsets,
            **jitkwargs,
        )
    if share_offsets:
        warnings.warn(
            "af.filter_jit(share_offsets=True) is now share_numbers=True: it "
            "shares programs that differ in any number they embed (float "
            "literals too), compiling twice per family",
            DeprecationWarning,
            stacklevel=2,
        )
        share_numbers = True
    if donate not in _DONATE:
        _equinox_filter_jit(fun, donate=donate)  # raises equinox's error for it
    options = {"donate": donate, **jitkwargs}
    if _layouts.dispatch_problem() is not None:
        return _equinox_filter_jit(fun, **options)
    filter_warning, donate_first, donate_rest = _DONATE[donate]
    signature = inspect.signature(fun)
    names = _program.names(fun)
    dynamic_fun, static_fun = _split(fun)
    layout: _layouts.Layout | None = None
    if not jitkwargs:
        try:
            hash(static_fun)
        except Exception:
            pass  # equinox raises when called: every call goes to it
        else:
            share = share_compiles and _layouts.can_share()
            share_numbers = share and share_numbers and _layouts.can_share_numbers()
            layout = _layouts.layout_for(
                fun,
                names,
                static_fun,
                (donate_first, donate_rest),
                (share, share_numbers),
            )
    plan = _Plan(signature, names, layout, filter_warning, static_fun, options)
    cached: Any = layout
    if layout is None:  # every call goes to equinox: its jax.jit holds the traces
        fallback = _equinox_filter_jit(fun, **options)
        plan.equinox = (dynamic_fun, fallback)
        # (where equinox's wrapper moved, this wrapper's calls are one group)
        ok = _eqx_private.watch_problem() is None
        cached = _eqx_private.cache_of(fallback) if ok else plan
    wrapper = _FilterJit(
        fn=names[1],
        _dynamic_fun=dynamic_fun,
        _static_fun=static_fun,
        _plan=plan,
        _cached=cached,
    )
    return eqx.module_update_wrapper(wrapper)
