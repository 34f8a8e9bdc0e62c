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
which is private (`jax._src.core.trace_ctx`): it is read here and nowhere else.
`check_compatible()` says what moved if these stop working.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.monitoring

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
_lock = threading.Lock()
_users = 0  # trace counters and compile sinks: the listeners exist while > 0
_trace_users = 0
# Called with `(program name, read from the persistent cache)` on each compile
# event; a tuple, replaced under the lock, so the listener reads it without one.
_sinks: tuple[Callable[[str, bool], None], ...] = ()


def _on_duration(event: str, duration_secs: float, **kwargs: Any) -> None:
    del duration_secs
    if event == TRACE_EVENT:
        counter.traces += 1
        if _trace_context().is_top_level():
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


def _duration_unregisterer() -> Callable[[Callable[..., None]], None]:
    # Public in newer JAX; older releases only have the private by-callback spelling.
    unregister = getattr(jax.monitoring, "unregister_event_duration_listener", None)
    if unregister is None:
        from jax._src import monitoring

        # getattr: the name exists only in those older releases.
        old_name = "_unregister_event_duration_listener_by_callback"
        unregister = getattr(monitoring, old_name)
    return unregister


def unregister_duration_listener(listener: Callable[..., None]) -> None:
    _duration_unregisterer()(listener)


def _acquire() -> None:  # under _lock
    global _users
    if _users == 0:
        counter.cache_hit = False  # an announcement seen before is not ours
        jax.monitoring.register_event_duration_secs_listener(_on_duration)
        jax.monitoring.register_event_listener(_on_event)
    _users += 1


def _release() -> None:  # under _lock
    global _users
    _users -= 1
    if _users == 0:
        unregister_duration_listener(_on_duration)
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


# -- JAX's current trace ---------------------------------------------------------


def _trace_context() -> Any:
    from jax._src import core

    return core.trace_ctx


def _jaxpr_trace_class() -> type:
    from jax._src.interpreters import partial_eval

    return partial_eval.DynamicJaxprTrace


def in_jit_trace() -> bool:
    """Whether the running code is being staged out by a jit (not run eagerly).

    Walks from JAX's current trace through the traces it forwards to (`grad` and
    `vmap` inside a jit forward to the jit's trace) looking for a jaxpr trace.
    """
    jaxpr_trace = _jaxpr_trace_class()
    trace = _trace_context().trace
    for _ in range(100):  # a bound: a trace that forwards to itself stops here
        if trace is None:
            break
        if isinstance(trace, jaxpr_trace):
            return True
        trace = getattr(trace, "parent_trace", None)
    return False


def check_compatible() -> None:
    """Raise `RuntimeError` naming what moved if these hooks cannot work."""
    try:
        context = _trace_context()
        context.trace  # noqa: B018
        context.is_top_level  # noqa: B018
        _jaxpr_trace_class()
    except (AttributeError, ImportError) as error:
        raise RuntimeError(
            f"jax._src.core.trace_ctx or DynamicJaxprTrace moved ({error}); "
            "arrayfield.explain_retraces cannot tell a jit trace from an eager call "
            "with this JAX version."
        ) from None
    try:
        jax.monitoring.register_event_duration_secs_listener  # noqa: B018
        _duration_unregisterer()
    except (AttributeError, ImportError) as error:
        raise RuntimeError(
            f"jax.monitoring cannot add and remove duration listeners ({error}); "
            "arrayfield.explain_retraces cannot count traces with this JAX version."
        ) from None
