"""`explain_retraces`: say, field by field, why a jitted function was traced again.

How it stays free on the hot path: a trace is detected, not inferred. JAX reports
every top-level trace to a `jax.monitoring` listener, which bumps a per-thread
counter (`_tracing.py`). A watched call reads that counter before and after; only
when it moved does arrayfield walk the arguments, build the call's signature
(paths, shapes, dtypes, weak types, hashed values, static fields) and compare it
with the signatures of the earlier calls that traced. A call that hits the cache
costs two attribute reads.

The silent-reuse check is the one exception. `1`, `1.0` and `True` are equal and
hash alike, so `eqx.filter_jit` happily reuses a trace made for an `int` when it is
called with a `float`, and nothing retraces. Seeing that needs the argument types
of every call, so the check runs per call, but only for a function that has
already traced with a Python number among its hashed leaves; a clean function
(arrays only) never pays for it.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar, overload

from .. import _eqx_private, _jax_private, _tracing
from .._env import EXPLAIN_RETRACES, env_flag
from .._errors import (
    CompatibilityWarning,
    class_name,
    short_repr,
    versions,
    warn_in_user_code,
)
from ._hints import FILTER_JIT, JAX_JIT
from ._record import FUNCTION_LEAF, Scope, Site, calling_jit

ENV_VAR = EXPLAIN_RETRACES

# Public names: the API reference shows them in `explain_retraces`'s signatures.
Function = TypeVar("Function", bound=Callable[..., Any])


# -- the decorator ----------------------------------------------------------------

# When wrappers nest (a decorated eqx.filter_jit function called in a `with` block,
# or a wrapped plain function traced by a watched jit), the innermost one that
# explains a trace sets this to the trace count it saw; an outer wrapper whose call
# began at or before that count knows the trace is explained and stays quiet.


class _ThreadState(threading.local):
    session: _Session | None = None
    depth = 0
    explained = -1


_thread = _ThreadState()

# The sites of decorated eqx.filter_jit functions, by id of their jit cache, so a
# `with` block's hook explains their calls with the decorator's own record.
_decorated: weakref.WeakValueDictionary[int, Site] = weakref.WeakValueDictionary()


def _run_watched(
    fn: Callable[..., Any], args: tuple, kwargs: dict
) -> tuple[Any, int, dict[str, Any] | None]:
    """`fn(*args, **kwargs)`, the trace count before it, and, where it traced,
    what `Site.traced` is told of the trace (`compiled`, `numbers`, `family`,
    `program`). The call is marked in this thread as watched: what it traces
    keeps its program and family for the explanation (`_tracing.record`), and
    an unasked warning leaves it to the explanation; other threads' calls are
    not marked, so nothing is kept for them."""
    __tracebackhide__ = True
    counter, now = _tracing.counter, _tracing.record
    before, compiles = counter.traces, counter.compiles
    runs, families = now.number_runs, now.number_families
    now.watched += 1
    try:
        out = fn(*args, **kwargs)
    finally:
        now.watched -= 1
    if counter.traces == before:
        return out, before, None
    # Taken, so that it is not kept; one recorded before this call is another
    # call's (other jits record none).
    recorded, now.program = now.program, None
    program = None if recorded is None or recorded[0] < before else recorded[1]
    numbers, family = None, 0
    if now.number_runs != runs:  # it ran (or started) a family's program
        family, did = now.family
        said = {"first": "new family", "generalised": "generalised"}
        numbers = said.get(did, "shared")
    elif now.number_families != families:  # it would under share_numbers=True
        numbers = "could share"
    traced = {
        "compiled": counter.compiles != compiles,
        "numbers": numbers,
        "family": family,
        "program": program,
    }
    return out, before, traced


def _wrap_jitted(fn: Any) -> Any:
    """Around a jitted callable: a call traced iff the trace counter moved."""
    is_filter_jit = _eqx_private.is_filter_jit(fn)
    site = Site(fn, FILTER_JIT if is_filter_jit else JAX_JIT)
    if is_filter_jit:
        cache = _eqx_private.cache_of(fn)
        site.keep_alive, site.shared = cache, True
        _decorated[id(cache)] = site
    check = not site.traced_scalars  # jax.jit traces scalars: nothing to reuse
    _tracing.acquire_trace_counter()
    no_extra: dict[str, Any] = {}

    @functools.wraps(fn)
    def explained(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        out, before, traced = _run_watched(fn, args, kwargs)
        if traced is None:
            if check and site.check_reuse:
                site.check_hit(args, kwargs)
        elif _thread.explained < before:  # else a `with` block's hook did
            site.traced(args, kwargs, no_extra, **traced)
        return out

    # The trace listener stays registered exactly as long as some wrapper lives.
    weakref.finalize(explained, _tracing.release_trace_counter)
    return explained


def _wrap_traced(fn: Any) -> Any:
    """Around a plain function that a jit traces: its first call in each jit trace.

    A call counts when it runs inside a jit trace (not under an eager `jax.grad`)
    and is the first one in that top-level trace: one trace may call it many times.
    """
    site = Site(fn, jit=None)
    _tracing.acquire_trace_counter()
    counter = _tracing.counter
    in_jit_trace = _tracing.in_jit_trace
    no_extra: dict[str, Any] = {}

    @functools.wraps(fn)
    def explained(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        if in_jit_trace() and site.last_trace != counter.top_level:
            site.last_trace = counter.top_level
            if site.traced(args, kwargs, no_extra, jit=calling_jit()):
                _thread.explained = counter.traces
        return fn(*args, **kwargs)

    weakref.finalize(explained, _tracing.release_trace_counter)
    return explained


# -- the context manager and the environment variable ------------------------------


class _Session:
    """The functions watched by one outermost `with` block (or by the process)."""

    def __init__(self) -> None:
        self.sites: dict[int, Site] = {}
        self.lock = threading.Lock()
        self.scope = Scope()

    def site_for(self, jit_wrapper: Any) -> Site:
        """The site of a function this session has not met, or has just met in
        another thread (its caller looked it up without the lock)."""
        cache = _eqx_private.cache_of(jit_wrapper)
        with self.lock:
            site = self.sites.get(id(cache))
            if site is None:
                # A decorated function keeps its own record (and no warning twice).
                site = _decorated.get(id(cache)) or Site(
                    jit_wrapper, FILTER_JIT, keep_alive=cache, scope=self.scope
                )
                self.sites[id(cache)] = site
        return site


_process_session: _Session | None = None


def _watching_call(original: Callable[..., Any]) -> Callable[..., Any]:
    """The `__call__` every `eqx.filter_jit` function has while watched."""
    cache_of = _eqx_private.cache_of

    def __call__(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        session = _thread.session or _process_session
        if session is None:
            return original(self, *args, **kwargs)
        site = session.sites.get(id(cache_of(self))) or session.site_for(self)
        out, before, traced = _run_watched(original, (self, *args), kwargs)
        if traced is None:
            if site.check_reuse:
                site.check_hit(args, kwargs)
            return out
        # The jitted callable is hashed into the key too: show it as an argument
        # (a decorator's record shows the arguments only, like the decorator).
        extra = {} if site.shared else {FUNCTION_LEAF: self.__wrapped__}
        quiet = _thread.explained >= before  # a wrapped plain function warned
        if site.traced(args, kwargs, extra, quiet=quiet, **traced) or site.shared:
            _thread.explained = before
        return out

    return __call__


@functools.cache
def _say_what_is_unseen() -> None:
    """Name, once, what this JAX and equinox hide from the diagnostics."""
    unseen = []
    problem = _eqx_private.watch_problem()
    if problem is not None:
        unseen.append(f"eqx.filter_jit calls are not watched ({problem})")
    problem = _jax_private.dispatch_problem()
    if problem is not None:
        unseen.append(
            "a retrace inside another jit is not told from an eager one, and "
            f"af.filter_jit runs as eqx.filter_jit ({problem})"
        )
    if unseen:
        warn_in_user_code(
            CompatibilityWarning(
                f"af.explain_retraces sees less on {versions()}: {'; '.join(unseen)}."
            )
        )


class RetraceWatch:
    """`with af.explain_retraces():` watches every filter_jit call in the block.

    Both `eqx.filter_jit` and `af.filter_jit` functions are watched.

    The block covers the thread that opens it. Blocks nest (an inner block shares
    the outer one's record), and leaving the outermost one removes every hook.
    """

    def __enter__(self) -> None:
        if _thread.depth == 0:
            _say_what_is_unseen()
            _tracing.acquire_trace_counter()
            try:
                _eqx_private.install_call_hook(_watching_call)
            except BaseException:
                _tracing.release_trace_counter()
                raise
            _thread.session = _Session()
        _thread.depth += 1

    def __exit__(self, *exc_info: Any) -> None:
        _thread.depth -= 1
        if _thread.depth == 0:
            session = _thread.session
            _thread.session = None
            _eqx_private.uninstall_call_hook()
            _tracing.release_trace_counter()
            # Last, so a warning filter set to "error" leaves no hook behind.
            if session is not None:  # the block's repeated retraces, counted
                for site in list(session.sites.values()):
                    site.tell_repeats()
                session.scope.tell_repeats()

    def __call__(self, fn: Function) -> Function:
        # `@af.explain_retraces()`, parentheses and all: the same as without.
        return explain_retraces(fn)


@overload
def explain_retraces(fn: None = None) -> RetraceWatch: ...


@overload
def explain_retraces(fn: Function) -> Function: ...


def explain_retraces(fn: Callable[..., Any] | None = None) -> Any:
    """Warn, field by field, whenever a jitted function is traced again.

    Each trace after a function's first issues an `af.RetraceWarning` naming the
    function (`qualname (file:line)`) and, for every argument leaf that differs
    from the closest earlier call that traced: its path as you would write it
    (`scene.sources[1].morph.size`, `opt_state[0].count`, `kwargs["lr"]`), the old
    and new value, why that leaf is part of the cache key and how to fix it.

    Under `af.filter_jit`, a trace that compiled is also compared with the
    programs compiled before for the same function, by any wrapper (a function
    defined anew in a loop has the same code): the warning says what is new in
    the program, read off the program itself, with the line of your code that
    reads it: an array the function captured (named as the closure or global
    that holds it; pass it as an argument to share one compile), numbers
    embedded as literals, or the first operation where the computation
    differs. A new function object's first compile warns too, under
    `eqx.filter_jit` naming the arrays it captures. A retrace that compiled
    nothing says so.

    It also flags the silent-reuse hazard with `af.TraceReuseWarning`: `1`, `1.0`
    and `True` hash alike, so `eqx.filter_jit` may run a trace compiled for an
    `int` on a call that passed a `float`, without retracing.

    **Three ways to use it:**

    - As a decorator around a jitted function: `af.explain_retraces(eqx.filter_jit(f))`
        or stacked above `@eqx.filter_jit` (`af.filter_jit` and `jax.jit` work
        too). Around a plain function that a jit then traces,
        `eqx.filter_jit(af.explain_retraces(f))`, each jit trace that calls it
        counts once (however often it calls it); eager calls, also under
        `jax.grad` or `jax.vmap`, are not traces.
    - As a context manager, `with af.explain_retraces(): ...`, which watches every
        `eqx.filter_jit` or `af.filter_jit` function called in the block by the
        same thread, without touching their code. The first trace of each function
        inside the block is the baseline.
    - For a whole process, without editing code: set the environment variable
        `ARRAYFIELD_EXPLAIN_RETRACES=1` before `arrayfield` is imported (e.g.
        `ARRAYFIELD_EXPLAIN_RETRACES=1 python -c "import arrayfield; ..."`, or add
        `import arrayfield` at the top of the script). Every thread is watched.

    Warnings point at your line that made the call, not into equinox or JAX; a
    function that is decorated and also called in a `with` block (or with the
    environment variable set) warns once per retrace. A retrace with the causes
    of the function's last warning (the same leaves, for the same reasons, with
    other values) is counted, not told again: one line gives the count before
    the function's next warning with other causes, at the end of the `with`
    block, or at exit.

    **Cost:** a call that hits the compilation cache costs two attribute reads
    (JAX reports traces to a listener; nothing is flattened). The silent-reuse
    check flattens the arguments on each call, but only for a function that has
    traced with a Python number among its hashed leaves; functions that take
    arrays only never pay for it.

    **Limits:** only top-level traces are seen (a jitted function called inside
    another one's trace is explained by the outer one). Each new trace is compared
    with the last 32 traced calls of that function. The reuse check looks at
    hashed leaves, not at values inside `static=True` fields.

    **Returns:**

    Given `fn`, a function of the same type (`Function` is any callable) that warns
    on retraces. Without it, a `RetraceWatch`: the context manager of
    `with af.explain_retraces():`, which also decorates like `af.explain_retraces`
    itself, so `@af.explain_retraces()` works too.

    **Raises:**

    `TypeError` if `fn` is not callable, or is a class.

    !!! example

        ```python
        import warnings
        import equinox as eqx
        import jax.numpy as jnp
        import arrayfield as af

        @af.explain_retraces
        @eqx.filter_jit
        def scale(x, factor):
            return x * factor

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scale(jnp.ones(3), 2.0)
            scale(jnp.ones(3), 3.0)  # a new Python float: traced again
        assert "factor: 2.0 -> 3.0" in str(caught[0].message)
        ```
    """
    if fn is None:
        return RetraceWatch()
    if isinstance(fn, type) or not callable(fn):
        what = f"the class {class_name(fn)}" if isinstance(fn, type) else short_repr(fn)
        raise TypeError(
            f"af.explain_retraces() wraps a function, not {what}. Decorate a "
            "function (or method) that is jitted or called under a jit, or use "
            "`with af.explain_retraces():` around the calls."
        )
    if _eqx_private.is_filter_jit(fn) or hasattr(fn, "lower"):
        return _wrap_jitted(fn)
    return _wrap_traced(fn)


def _enable_for_process() -> None:
    """Watch every `eqx.filter_jit` call in every thread, for good."""
    global _process_session
    if _process_session is not None:
        return
    _say_what_is_unseen()
    _tracing.acquire_trace_counter()
    _eqx_private.install_call_hook(_watching_call)
    _process_session = _Session()


if env_flag(ENV_VAR):
    _enable_for_process()
