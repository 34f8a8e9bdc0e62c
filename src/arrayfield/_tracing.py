"""What JAX is tracing and compiling: one counter of its events for the process,
and whether code runs inside a jit trace.

JAX reports each top-level trace and each XLA compile to `jax.monitoring`
listeners (public API) under event names that are not themselves documented
API. One pair of listeners, registered while anything counts and removed when
the last user leaves (where JAX can remove them: 0.4.38 cannot remove an event
listener, which then only sets a flag), feeds two readers:

- a per-thread `counter` that `explain_retraces` reads before and after a call
  ("this call traced", "it compiled"): O(1), nothing flattened;
- every open `af.count_compiles` block (`add_compile_sink`), by program name.

A program read from JAX's persistent compilation cache is timed as a backend
compile too, announced by a cache-hit event just before on the same thread:
both readers count it as a read, not a compile.

Telling a jit trace from an eager transformation needs JAX's current trace,
which is private (`jax._src.core.trace_ctx`): `_jax_private` reads it.
`check_compatible()` says what moved if these stop working.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.monitoring

from . import _jax_private

# JAX records this event when it finishes tracing a function for jit
# (`jax._src.dispatch.JAXPR_TRACE_EVENT`), only for top-level traces.
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
# And this one for each XLA compile, and for each program read from JAX's
# persistent compilation cache...
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
# ...which this event announces just before, on the same thread.
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"


class _Counter(threading.local):
    # Class attributes: each new thread starts at 0 without a lookup miss.
    traces = 0  # every trace event (older JAX also reports nested traces)
    top_level = 0  # only traces that finished outside any other trace
    compiles = 0  # XLA compiles (not programs read from the persistent cache)
    cache_hit = False  # a persistent-cache read announced, its event not yet seen


counter = _Counter()


class _TraceRecord(threading.local):
    """What this thread's `af.filter_jit` traces did, written by dispatch and
    read by `explain_retraces` around a call: how many traces met a family of
    programs that differ only in numbers (`number_runs`) and how many would
    have, had the wrapper shared numbers (`number_families`); `family`, the
    number of the family the latest such trace met and what it did there
    ("first": its own program started it; "generalised": it compiled the
    family's program over the numbers that differ; "joined": it ran that
    program, compiling nothing); and `program`, the
    latest traced program (`(closed jaxpr, jit parameters)`) with the trace
    count when it was traced, kept only while this thread's call is `watched`
    (by an `explain_retraces` block or decorator: a depth, set around the call).
    The diagnostics read it here, never in dispatch's modules. A watched call
    gives the same results; dispatch only records more for it (its program, and
    the family it would join without `share_numbers`)."""

    watched: int = 0
    number_runs: int = 0
    number_families: int = 0
    family: tuple[int, str] = (0, "")
    program: Any = None


record = _TraceRecord()
_lock = threading.Lock()
_users = 0  # trace counters and compile sinks: the listeners exist while > 0
_trace_users = 0
# Called with `(program name, read from the persistent cache)` on each compile
# event; a tuple, replaced under the lock, so the listener reads it without one.
_sinks: tuple[Callable[[str, bool], None], ...] = ()


def _on_duration(event: str, duration_secs: float, **kwargs: Any) -> None:
    del duration_secs
    if _users == 0:  # a listener JAX could not remove (`_kept`)
        return
    if event == TRACE_EVENT:
        counter.traces += 1
        if _jax_private.TRACE_CTX is None or _jax_private.at_top_level():
            counter.top_level += 1
    elif event == COMPILE_EVENT:
        read = counter.cache_hit
        if read:
            counter.cache_hit = False
        else:
            counter.compiles += 1
        if _sinks:
            name = str(kwargs.get("fun_name", "<unnamed>"))
            for sink in _sinks:
                sink(name, read)


def _on_event(event: str, **kwargs: Any) -> None:
    del kwargs
    if event == CACHE_HIT_EVENT:
        counter.cache_hit = True


def _duration_unregisterer() -> Callable[[Callable[..., None]], None] | None:
    # Public in newer JAX; older releases only have the private by-callback spelling.
    unregister = getattr(jax.monitoring, "unregister_event_duration_listener", None)
    if unregister is None:
        unregister = _jax_private.OLD_UNREGISTER_DURATION
    return unregister


def unregister_duration_listener(listener: Callable[..., None]) -> bool:
    """Remove a duration listener; False where this JAX cannot (it stays)."""
    unregister = _duration_unregisterer()
    if unregister is None:
        return False
    unregister(listener)
    return True


# Set where the duration listener could not be removed: it stays registered,
# and counts nothing while no one counts (`_on_duration` reads `_users`).
_kept = False


def _acquire() -> None:  # under _lock
    global _users
    if _users == 0:
        counter.cache_hit = False  # an announcement seen before is not ours
        if not _kept:
            jax.monitoring.register_event_duration_secs_listener(_on_duration)
        jax.monitoring.register_event_listener(_on_event)
    _users += 1


def _release() -> None:  # under _lock
    global _users, _kept
    _users -= 1
    if _users == 0:
        _kept = not unregister_duration_listener(_on_duration)
        unregister = getattr(jax.monitoring, "unregister_event_listener", None)
        if unregister is not None:  # older JAX keeps it: it only sets a flag
            unregister(_on_event)


def acquire_trace_counter() -> None:
    """Start counting traces (reference counted; pair with `release_trace_counter`)."""
    global _trace_users
    with _lock:
        _acquire()
        _trace_users += 1


def release_trace_counter() -> None:
    global _trace_users
    with _lock:
        _trace_users -= 1
        _release()


def add_compile_sink(sink: Callable[[str, bool], None]) -> None:
    """Call `sink(program name, read from the persistent cache)` on every compile
    event from now on, in any thread, until `remove_compile_sink(sink)`."""
    global _sinks
    with _lock:
        _acquire()
        _sinks = (*_sinks, sink)


def remove_compile_sink(sink: Callable[[str, bool], None]) -> None:
    global _sinks
    with _lock:
        _sinks = tuple(s for s in _sinks if s is not sink)
        _release()


def in_jit_trace() -> bool:
    """Whether the running code is being staged out by a jit (not run eagerly).
    False where this JAX hides its current trace (the diagnostics say so once)."""
    if _jax_private.TRACE_CTX is None:
        return False
    return _jax_private.in_jit_trace()


def check_compatible() -> None:
    """Raise `RuntimeError` naming what moved if these hooks cannot work."""
    problem = _jax_private.dispatch_problem()
    if problem is not None:
        raise RuntimeError(
            f"arrayfield cannot tell a jit trace from an eager call with jax "
            f"{jax.__version__}: {problem}"
        )
    try:
        jax.monitoring.register_event_duration_secs_listener  # noqa: B018
        if _duration_unregisterer() is None:
            raise AttributeError("no way to unregister a duration listener")
    except (AttributeError, ImportError) as error:
        raise RuntimeError(
            f"jax.monitoring cannot add and remove duration listeners ({error}); "
            "arrayfield.explain_retraces cannot count traces with this JAX version."
        ) from None
