"""Every place arrayfield depends on JAX's or equinox's internals, in one module.

Three hooks:

- Counting traces. JAX reports each top-level trace to `jax.monitoring` listeners
  (public API) under an event name that is not itself documented API. A listener
  increments a per-thread counter, so a wrapper learns "this call traced" by
  reading the counter before and after the call: O(1), nothing flattened.
- Knowing which jit trace is running. A plain function that a jit traces sees
  tracers, but so does one called under an eager `jax.grad`, and one jit trace may
  call it twice. `in_jit_trace()` reads JAX's current trace (private) to tell a
  jit trace from an eager transformation, and the listener also counts the traces
  that finish at the top level (`counter.top_level`), which numbers them: two calls
  with the same count are in the same top-level trace.
- Seeing every `eqx.filter_jit` call. The functions `eqx.filter_jit` returns are
  instances of the private class `equinox._jit._JitWrapper`; `explain_retraces()`
  used as a context manager swaps that class's `__call__` while any block is open.

`check_compatible()` says in one sentence what moved when either stops working;
`tests/test_retrace.py` calls it, so an incompatible upgrade fails loudly.
"""

from __future__ import annotations

import dataclasses
import operator
import threading
from collections.abc import Callable
from typing import Any

import jax
import jax.monitoring

# JAX records this event when it finishes tracing a function for jit
# (`jax._src.dispatch.JAXPR_TRACE_EVENT`), only for top-level traces.
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"


class _Counter(threading.local):
    # Class attributes: each new thread starts at 0 without a lookup miss.
    traces = 0  # every trace event (older JAX also reports nested traces)
    top_level = 0  # only traces that finished outside any other trace


counter = _Counter()
_lock = threading.Lock()
_listener_users = 0


def _on_duration(event: str, duration_secs: float, **kwargs: Any) -> None:
    del duration_secs, kwargs
    if event == TRACE_EVENT:
        counter.traces += 1
        if _trace_context().is_top_level():
            counter.top_level += 1


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


def acquire_trace_counter() -> None:
    """Start counting traces (reference counted; pair with `release_trace_counter`)."""
    global _listener_users
    with _lock:
        if _listener_users == 0:
            jax.monitoring.register_event_duration_secs_listener(_on_duration)
        _listener_users += 1


def release_trace_counter() -> None:
    global _listener_users
    with _lock:
        _listener_users -= 1
        if _listener_users == 0:
            unregister_duration_listener(_on_duration)


def trace_counter_active() -> bool:
    return _listener_users > 0


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


# -- equinox's jit wrapper --------------------------------------------------------


def jit_wrapper_class() -> type:
    """The class of the callables `eqx.filter_jit` returns."""
    from equinox import _jit

    return _jit._JitWrapper


def is_filter_jit(fn: Any) -> bool:
    try:
        return isinstance(fn, jit_wrapper_class())
    except (ImportError, AttributeError):
        return False


# The `jax.jit` object holding a wrapper's compiled traces. `eqx.filter_jit` shares
# one per function object (and jit options), so keying on it groups the traces that
# really share a cache. An attrgetter: it runs on every watched call.
cache_of: Callable[[Any], Any] = operator.attrgetter("_cached")


_original_call: Callable[..., Any] | None = None
_hook_users = 0


def install_call_hook(make_call: Callable[[Callable[..., Any]], Any]) -> None:
    """Replace `__call__` of every `eqx.filter_jit` function by `make_call(original)`.

    Reference counted; `uninstall_call_hook` restores the original when the last
    user leaves.
    """
    global _original_call, _hook_users
    with _lock:
        if _hook_users == 0:
            cls = jit_wrapper_class()
            original = cls.__dict__["__call__"]
            _original_call = original
            type.__setattr__(cls, "__call__", make_call(original))
        _hook_users += 1


def uninstall_call_hook() -> None:
    global _original_call, _hook_users
    with _lock:
        _hook_users -= 1
        if _hook_users == 0:
            type.__setattr__(jit_wrapper_class(), "__call__", _original_call)
            _original_call = None


def call_hook_installed() -> bool:
    return _hook_users > 0


def check_compatible() -> None:
    """Raise `RuntimeError` naming what moved if these hooks cannot work."""
    try:
        cls = jit_wrapper_class()
    except (ImportError, AttributeError) as error:
        raise RuntimeError(
            "arrayfield.explain_retraces needs equinox._jit._JitWrapper (the class of "
            f"what eqx.filter_jit returns), which this equinox lacks: {error}. "
            "Pin equinox to a version arrayfield supports."
        ) from None
    fields = {f.name for f in dataclasses.fields(cls)}
    if not callable(cls.__dict__.get("__call__")) or "_cached" not in fields:
        raise RuntimeError(
            "equinox._jit._JitWrapper no longer defines __call__ and _cached as "
            "arrayfield.explain_retraces expects; pin equinox to a supported version."
        )
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
