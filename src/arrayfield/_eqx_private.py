"""Equinox's jit internals that dispatch and diagnostics read, each through one
accessor here.

- Being `eqx.filter_jit` (for `af.filter_jit`): its runtime-error message for
  `eqx.error_if`, its test of JAX's callback log line and its cache-clearing
  list. `af.filter_jit` splits the function and names its programs itself, with
  public calls, and makes an `eqx.filter_jit` only for the calls it hands over.
- Seeing every `eqx.filter_jit` call (the diagnostics alone). The callables
  `eqx.filter_jit` returns are instances of the private
  `equinox._jit._JitWrapper`; the `jax.jit` holding their traces is `_cached`.
  While an `explain_retraces()` block is
  open, the `__call__` of `_JitWrapper` (and of every class registered with
  `watch_jit_class`, such as `af.filter_jit`'s wrapper) is swapped for a
  watching one, and put back when the last block closes: the one change to
  another library's class, and only for the length of a block. It lets the
  diagnostics explain `eqx.filter_jit` functions inside libraries, which the
  user cannot decorate.

Every read is guarded: what moved is recorded in `MOVED`, and
`dispatch_problem()` and `watch_problem()` (which also checks the wrapper
class's fields) name it, so that `af.filter_jit` runs as `eqx.filter_jit` and
the diagnostics say what they cannot see, each after one `CompatibilityWarning`.

The leaves `eqx.filter_jit` traces are read here too: `equinox._filters` keeps
them as a tuple of types, which the hot paths test with one `isinstance`; where
it moved, `eqx.is_array` itself (public, slower) decides.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import operator
import threading
from collections.abc import Callable
from typing import Any

import equinox
import jax
import numpy as np

MOVED: list[str] = []


def _module(name: str) -> Any:
    try:
        return __import__(f"equinox.{name}", globals(), None, ["__name__"], 0)
    except ImportError as error:
        MOVED.append(f"equinox.{name} ({type(error).__name__})")
        return None


def _name(module: Any, where: str, name: str, default: Any = None) -> Any:
    value = getattr(module, name, None)
    if value is None:
        if module is not None:
            MOVED.append(f"equinox.{where}.{name}")
        return default
    return value


_jit = _module("_jit")
_filters = _module("_filters")
_caches = _module("_caches")


# -- the leaves eqx.filter_jit traces ------------------------------------------------


def _array_types() -> tuple[type, ...] | None:
    # equinox 0.13 keeps the tuple in `_filters._ARRAY_TYPES`; before, it tested
    # these three. Either is taken only where it says what `eqx.is_array` says.
    # No JAX array among the samples: making one here would start a backend
    # and compile before a program sets up JAX (its persistent cache, say).
    types = getattr(_filters, "_ARRAY_TYPES", (jax.Array, np.ndarray, np.generic))
    if isinstance(types, tuple) and all(isinstance(t, type) for t in types):
        samples = (np.zeros(2), np.float32(1), 1, 1.0, True, "a", None)
        agree = [isinstance(x, types) for x in samples] == list(
            map(equinox.is_array, samples)
        )
        if agree and any(issubclass(jax.Array, t) for t in types):
            return types
    MOVED.append("equinox._filters._ARRAY_TYPES (disagrees with eqx.is_array)")
    return None


# What `eqx.is_array` accepts on the installed equinox and JAX: the leaves
# `eqx.filter_jit` traces (it hashes every other leaf). Read from equinox, since
# it grows with JAX (LiteralArray, TypedNdArray). Tracers are JAX arrays. None
# where it moved: `is_traced_leaf` is then `eqx.is_array`.
EQX_ARRAY_TYPES: tuple[type, ...] | None = _array_types()


def _is_traced_leaf(x: Any) -> bool:
    return isinstance(x, EQX_ARRAY_TYPES)  # type: ignore[arg-type]


# Whether `eqx.filter_jit` (and `af.filter_jit`) traces this leaf; it hashes
# every other one into its cache key. `_jit`'s hot path inlines it.
is_traced_leaf: Callable[[Any], bool] = (
    _is_traced_leaf if EQX_ARRAY_TYPES is not None else equinox.is_array
)


# -- equinox's jit wrapper ---------------------------------------------------------

_JIT_WRAPPER: type | None = _name(_jit, "_jit", "_JitWrapper")


def equinox_filter_jit() -> Callable[..., Any]:
    """Equinox's `filter_jit`, from its own module: `equinox.filter_jit` may have
    been pointed at `af.filter_jit` (as `compat/swap_filter_jit.py` does)."""
    return getattr(_jit, "filter_jit", None) or _PUBLIC_FILTER_JIT


# Captured when this module loads, before any program can repoint it.
_PUBLIC_FILTER_JIT: Callable[..., Any] = equinox.filter_jit

# The `jax.jit` object holding a wrapper's compiled traces. `eqx.filter_jit` shares
# one per function name (and jit options), so keying on it groups the traces that
# really share a cache. An attrgetter: it runs on every watched call.
cache_of: Callable[[Any], Any] = operator.attrgetter("_cached")


class _NoError(Exception):
    """Stands in for an error class equinox no longer has (never raised)."""


EquinoxRuntimeError: type[Exception] = _name(
    _jit, "_jit", "EquinoxRuntimeError", _NoError
)
JaxRuntimeError: type[Exception] = getattr(_jit, "JaxRuntimeError", None) or getattr(
    jax.errors, "JaxRuntimeError", _NoError
)
# Equinox's test for JAX's "jax.pure_callback failed" log line, which it hides while
# a call runs (af.filter_jit's own filter asks it).
CallbackLogFilter: type[logging.Filterer] = _name(
    _jit, "_jit", "_FilterCallback", logging.Filterer
)
_ERROR_MESSAGE: Any = _name(_jit, "_jit", "_on_error_msg")
if _jit is not None and not hasattr(_jit, "last_error_info"):
    MOVED.append("equinox._jit.last_error_info")


def raise_equinox_error(error: Exception, jit_id: bytes) -> None:
    """Re-raise an `eqx.error_if` failure as `eqx.filter_jit` would; else return.

    The message is equinox's: its text, then the stack recorded at trace time up
    to the call whose frame holds `__equinox_jit_id__ == jit_id`.
    """
    info = getattr(_jit, "last_error_info", None)
    if info is None or "_EquinoxRuntimeError: " not in str(error):
        return
    message, stack = info
    pieces: list[str] = []
    for id_or_text in stack:
        if type(id_or_text) is str:
            pieces.append(id_or_text)
        elif id_or_text == jit_id:
            break
    text = _ERROR_MESSAGE.format(msg=message, stack="".join(reversed(pieces)))
    raise EquinoxRuntimeError(text) from None


_CACHE_CLEARS: Any = _name(_caches, "_caches", "cache_clears")


def register_cache_clear(clear: Callable[[], None]) -> None:
    """Have `eqx.clear_caches()` clear `clear`'s cache too, as it clears its own."""
    if _CACHE_CLEARS is not None:
        _CACHE_CLEARS.append(clear)


# -- the probes --------------------------------------------------------------------


# The field of equinox's jit wrapper (and of af's, which mirrors its leaves) that
# holds the function's non-array part: `audit` reads closures made per instance
# there. Named here, with the others the probe below checks.
FUNCTION_FIELD = "_static_fun"


def _wrapper_fields_problem() -> str | None:
    if _JIT_WRAPPER is None:
        return "equinox._jit._JitWrapper moved"
    try:
        fields = {f.name for f in dataclasses.fields(_JIT_WRAPPER)}
    except TypeError:
        return "equinox._jit._JitWrapper is no longer a dataclass"
    if not {"_cached", "_dynamic_fun", FUNCTION_FIELD} <= fields:
        return "equinox._jit._JitWrapper lost _cached, _dynamic_fun or _static_fun"
    if not callable(_JIT_WRAPPER.__dict__.get("__call__")):
        return "equinox._jit._JitWrapper no longer defines __call__"
    return None


@functools.cache
def dispatch_problem() -> str | None:
    """What stops `af.filter_jit` from standing in for `eqx.filter_jit` on this
    equinox, or None: a name it reads that moved (the leaves equinox traces are
    checked against `eqx.is_array` where they are read). Its wrapper class is the
    diagnostics' alone: `af.filter_jit` splits functions itself and builds an
    `eqx.filter_jit` only for the calls it hands to equinox."""
    moved = [name for name in MOVED if not name.startswith("equinox._jit._JitWrapper")]
    return "moved: " + ", ".join(moved) if moved else None


@functools.cache
def watch_problem() -> str | None:
    """What stops the diagnostics from watching `eqx.filter_jit` calls, or None."""
    return _wrapper_fields_problem()


# -- watching calls ------------------------------------------------------------------

_lock = threading.Lock()  # the registry and the call hook

# Other wrapper classes that behave as `eqx.filter_jit`'s (af.filter_jit's): they
# register themselves when their module loads, so nothing here imports them.
_registered_classes: list[type] = []
_registered_files: set[str] = set()


def watch_jit_class(cls: type, *filenames: str) -> None:
    """Have the call hook and `is_filter_jit` treat `cls` as `eqx.filter_jit`'s.

    `cls` must define `__call__` and `_cached` (the `jax.jit` holding its traces)
    as `equinox._jit._JitWrapper` does; `filenames`, the modules whose code runs
    its calls and traces, are how the diagnostics recognise its frames. A class
    registered while a hook is installed is hooked at once.
    """
    with _lock:
        _registered_classes.append(cls)
        _registered_files.update(filenames)
        if _hook_users > 0 and _make_call is not None:
            _hook(cls, _make_call)


def is_jit_wrapper_file(filename: str) -> bool:
    """Whether code in `filename` is a registered jit wrapper's (af.filter_jit's)."""
    return filename in _registered_files


def jit_wrapper_classes() -> tuple[type, ...]:
    """The classes of the callables `eqx.filter_jit` returns (where this equinox
    lets us see them as we read them) and of those registered with
    `watch_jit_class`: what the call hook swaps and the diagnostics unwrap."""
    own = () if watch_problem() is not None else (_JIT_WRAPPER,)
    return (*own, *_registered_classes)  # type: ignore[return-value]


def is_filter_jit(fn: Any) -> bool:
    """Whether `fn` came from `eqx.filter_jit` or `af.filter_jit` (as far as this
    equinox lets us see)."""
    return isinstance(fn, jit_wrapper_classes())


_original_calls: dict[type, Callable[..., Any]] = {}
_hook_users = 0
_make_call: Callable[[Callable[..., Any]], Any] | None = None


def _hook(cls: type, make_call: Callable[[Callable[..., Any]], Any]) -> None:
    original = cls.__dict__["__call__"]
    _original_calls[cls] = original
    type.__setattr__(cls, "__call__", make_call(original))


def install_call_hook(make_call: Callable[[Callable[..., Any]], Any]) -> None:
    """Replace `__call__` of every `eqx.filter_jit` and `af.filter_jit` function by
    `make_call(original)`.

    Reference counted; `uninstall_call_hook` restores the original when the last
    user leaves.
    """
    global _hook_users, _make_call
    with _lock:
        if _hook_users == 0:
            _make_call = make_call
            for cls in jit_wrapper_classes():
                _hook(cls, make_call)
        _hook_users += 1


def uninstall_call_hook() -> None:
    global _hook_users, _make_call
    with _lock:
        _hook_users -= 1
        if _hook_users == 0:
            for cls, original in _original_calls.items():
                type.__setattr__(cls, "__call__", original)
            _original_calls.clear()
            _make_call = None


def call_unwatched(jit_wrapper: Any, args: tuple, kwargs: dict) -> Any:
    """Call an `eqx.filter_jit` function past the hook (its caller is watched)."""
    __tracebackhide__ = True
    original = _original_calls.get(type(jit_wrapper))
    if original is None:
        return jit_wrapper(*args, **kwargs)
    return original(jit_wrapper, *args, **kwargs)


def call_hook_installed() -> bool:
    return _hook_users > 0
