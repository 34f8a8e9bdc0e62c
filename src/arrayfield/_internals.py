"""The private JAX and equinox names that dispatch and diagnostics still need.

(What JAX is tracing and compiling is `_tracing`'s; ArrayModule needs none.)

- Seeing every `eqx.filter_jit` call. The functions `eqx.filter_jit` returns are
  instances of the private class `equinox._jit._JitWrapper`; `explain_retraces()`
  used as a context manager swaps that class's `__call__` (and that of every class
  registered with `watch_jit_class`, such as `af.filter_jit`'s wrapper) while any
  block is open, and puts it back when the last one closes.
- Being `eqx.filter_jit` (for `af.filter_jit`): the function's partition held by
  the wrapper (`_dynamic_fun`, `_static_fun`), equinox's runtime-error message
  for `eqx.error_if`, its cache-clearing list, JAX's traceback exclusions, what
  a traced `jax.jit` holds (its jaxpr, parameters and trees), and the states
  JAX's own dispatch reads (the current trace, `disable_jit`).

It also holds the facts about equinox and JAX that several modules need: equinox's
own `Module` class (captured at import, so a program that rebinds `equinox.Module`
changes nothing here), the leaf types `eqx.filter_jit` traces, JAX's concrete
array class and the Python number types JAX treats as scalars.

This module imports no other arrayfield module: every floor above may use it.

`check_compatible()` says in one sentence what moved when either stops working;
`tests/test_retrace.py` and `tests/test_jit.py` call it, so an incompatible
upgrade fails loudly. docs/architecture.md lists every name and its guard.
"""

from __future__ import annotations

import dataclasses
import logging
import operator
import threading
from collections.abc import Callable
from typing import Any

import equinox
import jax
import jax.extend
import numpy as np

# -- equinox's jit wrapper --------------------------------------------------------


def jit_wrapper_class() -> type:
    """The class of the callables `eqx.filter_jit` returns."""
    from equinox import _jit

    return _jit._JitWrapper


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


def _watched_classes() -> tuple[type, ...]:
    return (jit_wrapper_class(), *_registered_classes)


def is_filter_jit(fn: Any) -> bool:
    """Whether `fn` came from `eqx.filter_jit` or `af.filter_jit`."""
    try:
        return isinstance(fn, _watched_classes())
    except (ImportError, AttributeError):
        return False


# The `jax.jit` object holding a wrapper's compiled traces. `eqx.filter_jit` shares
# one per function object (and jit options), so keying on it groups the traces that
# really share a cache. An attrgetter: it runs on every watched call.
cache_of: Callable[[Any], Any] = operator.attrgetter("_cached")


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
            for cls in _watched_classes():
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


# -- being eqx.filter_jit (for af.filter_jit) ---------------------------------------


def _array_impl() -> type:
    try:
        from jax._src.array import ArrayImpl
    except ImportError:  # moved: `type(x) is jax.Array` is never true, still correct
        return jax.Array
    return ArrayImpl


# The class of every concrete JAX array: an exact type test for it is a shortcut
# for `isinstance(x, jax.Array)`, whose metaclass check costs ~0.1 us per leaf.
ARRAY_IMPL: type = _array_impl()

# The Python numbers JAX treats as scalars (`jax.jit` traces them as weakly typed
# 0-d arrays; `eqx.filter_jit` hashes them). Exact types: subclasses such as
# IntEnum are decided case by case where it matters.
PYTHON_NUMBERS: tuple[type, ...] = (bool, int, float, complex)

# Equinox's own Module class, captured at import: a program may rebind
# `equinox.Module` (to `af.ArrayModule`, as the compatibility plugins do), and
# "is this an equinox Module" must not change with it.
EQX_MODULE: type = equinox.Module


def is_module(node: Any) -> bool:
    """Whether `node` is an equinox Module (of any subclass, ArrayModules included)."""
    return isinstance(node, EQX_MODULE)


def _equinox_array_types() -> tuple[type, ...]:
    from equinox import _filters

    types = getattr(_filters, "_ARRAY_TYPES", None)
    if isinstance(types, tuple) and all(isinstance(t, type) for t in types):
        return types
    return (jax.Array, np.ndarray, np.generic)  # check_compatible says it moved


# What `eqx.is_array` accepts on the installed equinox and JAX: the leaves
# `eqx.filter_jit` traces (it hashes every other leaf). Read from equinox, since
# it grows with JAX (LiteralArray, TypedNdArray). Tracers are JAX arrays.
EQX_ARRAY_TYPES: tuple[type, ...] = _equinox_array_types()


def is_traced_leaf(x: Any) -> bool:
    """Whether `eqx.filter_jit` (and `af.filter_jit`) traces this leaf; it hashes
    every other one into its cache key. The one definition: `_jit`'s hot path
    inlines it over the same types."""
    return isinstance(x, EQX_ARRAY_TYPES)


# The halves of the function `eqx.filter_jit` partitioned when it wrapped it: a
# tuple of its arrays (None elsewhere) and `(other leaves, treedef)`.
DYNAMIC_FUN = "_dynamic_fun"
static_fun_of: Callable[[Any], Any] = operator.attrgetter("_static_fun")


def fn_names(fun: Any) -> tuple[str, str]:
    """`(__name__, __qualname__)` as equinox names the function it compiles."""
    from equinox._compile_utils import get_fn_names

    return get_fn_names(fun)


def _equinox_jit() -> Any:
    from equinox import _jit

    return _jit


def equinox_filter_jit() -> Callable[..., Any]:
    """Equinox's `filter_jit`, from its own module: `equinox.filter_jit` may have
    been pointed at `af.filter_jit` (as `compat/swap_filter_jit.py` does)."""
    return _equinox_jit().filter_jit


class _NoError(Exception):
    """Stands in for an error class equinox no longer has (check_compatible says)."""


# getattr: if these move, `import arrayfield` still works; check_compatible fails.
EquinoxRuntimeError: type[Exception] = getattr(
    _equinox_jit(), "EquinoxRuntimeError", _NoError
)
JaxRuntimeError: type[Exception] = getattr(_equinox_jit(), "JaxRuntimeError", _NoError)
# Equinox's test for JAX's "jax.pure_callback failed" log line, which it hides while
# a call runs (af.filter_jit's own filter asks it).
CallbackLogFilter: type[logging.Filterer] = getattr(
    _equinox_jit(), "_FilterCallback", logging.Filterer
)


def raise_equinox_error(error: Exception, jit_id: bytes) -> None:
    """Re-raise an `eqx.error_if` failure as `eqx.filter_jit` would; else return.

    The message is equinox's: its text, then the stack recorded at trace time up
    to the call whose frame holds `__equinox_jit_id__ == jit_id`.
    """
    jit = _equinox_jit()
    if jit.last_error_info is None or "_EquinoxRuntimeError: " not in str(error):
        return
    message, stack = jit.last_error_info
    pieces: list[str] = []
    for id_or_text in stack:
        if type(id_or_text) is str:
            pieces.append(id_or_text)
        elif id_or_text == jit_id:
            break
    text = jit._on_error_msg.format(msg=message, stack="".join(reversed(pieces)))
    raise EquinoxRuntimeError(text) from None


# What `_program_key` reads off a traced `jax.jit` (see its docstring).
def _dispatch_internals() -> dict[str, Any]:
    import importlib

    from jax._src import config, core

    def optional(module: str, name: str) -> Any:
        try:
            return getattr(importlib.import_module(f"jax._src.{module}"), name)
        except (ImportError, AttributeError):  # older JAX: compared by identity
            return None

    value_types = {
        core.ShapedArray,
        jax.sharding.NamedSharding,
        jax.sharding.SingleDeviceSharding,
        jax.sharding.PartitionSpec,
        optional("mesh", "Mesh"),
        optional("mesh", "AbstractMesh"),
        optional("named_sharding", "UnspecifiedValue"),
        optional("sharding_impls", "UnspecifiedValue"),
        optional("sharding_impls", "GSPMDSharding"),
        optional("layout", "Layout"),
        optional("layout", "Format"),
    } - {None}
    # The differentiation rules of custom_jvp/custom_vjp equations, new objects in
    # every trace: inert where their lowering reads the primal jaxpr alone (it
    # takes `call_jaxpr` and ignores the rest), as JAX 0.7 and later do.
    inert: dict[str, frozenset[str]] = {}
    lowering = optional("custom_derivatives", "_custom_jvp_vjp_call_lowering")
    if lowering is not None and _reads_only(lowering, "call_jaxpr"):
        inert = {
            "custom_jvp_call": frozenset({"jvp_jaxpr_fun", "jvp_jaxpr_thunk"}),
            "custom_vjp_call": frozenset({"fwd_jaxpr_thunk", "bwd", "out_trees"}),
        }
    # What JAX's `trace_state_clean()` reads, as its own states (one C++ read each on
    # the hot path): the current trace and axis environment, and their top values.
    top_level = None
    names = ("trace_state_strong_ref", "eval_trace", "axis_env_state", "top_axis_env")
    if all(hasattr(core, name) for name in names):
        top_level = tuple(getattr(core, name) for name in names)
    return {
        "top_level": top_level,
        "disable_jit": config.disable_jit,
        "drop_var": core.DropVar,
        "value_types": frozenset(value_types),
        "inert": inert,
        "trace_context": config.trace_context,
    }


def _reads_only(lowering: Callable[..., Any], name: str) -> bool:
    """Whether a lowering rule's keyword parameters are `name` and `**_` alone."""
    import inspect

    kinds = {
        p.name: p.kind
        for p in inspect.signature(lowering).parameters.values()
        if p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD)
    }
    keywords = [n for n, k in kinds.items() if k is inspect.Parameter.KEYWORD_ONLY]
    return keywords == [name]


_DISPATCH = _dispatch_internals()
DROP_VAR: type = _DISPATCH["drop_var"]
VALUE_PARAM_TYPES: frozenset[type] = _DISPATCH["value_types"]
INERT_PARAMS: dict[str, frozenset[str]] = _DISPATCH["inert"]
# JAX's configuration as its jit cache keys it (x64, default device, ...): cheap,
# a tuple JAX keeps up to date.
trace_context: Callable[[], Any] = _DISPATCH["trace_context"]
# `(trace state, its top value, axis-env state, its top value)`: at the top level
# when both states hold their top values (what JAX's `trace_state_clean()` tests,
# and only then does a call run an executable); None
# where JAX keeps them elsewhere, and then no compile is shared.
TOP_LEVEL_STATE: tuple[Any, Any, Any, Any] | None = _DISPATCH["top_level"]
DISABLE_JIT: Any = _DISPATCH["disable_jit"]  # `.value`: jax.disable_jit() is on


def jit_disabled() -> bool:
    """Whether `jax.disable_jit()` is on: the state JAX's own jit reads (`_jit`'s
    hot path reads `DISABLE_JIT.value` inline)."""
    return bool(DISABLE_JIT.value)


# JAX 0.11 merged `ClosedJaxpr` into `Jaxpr` (a jaxpr carries its constants);
# `jax.extend.core` keeps the old name as an alias of the new class, which type
# checkers do not see as exported. Both are read here, once.
JAXPR: type = jax.extend.core.Jaxpr
CLOSED_JAXPR: type = getattr(jax.extend.core, "ClosedJaxpr", JAXPR)
JAXPR_TYPES: tuple[type, ...] = tuple({JAXPR, CLOSED_JAXPR})
LITERAL: type = jax.extend.core.Literal


def closed_jaxpr(jaxpr: Any) -> Any:
    """`jaxpr`, whose constants are all inputs now, as jit's `jaxpr` parameter
    holds a program: itself where the two classes are one (JAX 0.11+; replacing
    its constvars dropped any constants it carried), wrapped with no constants
    before."""
    return jaxpr if CLOSED_JAXPR is JAXPR else CLOSED_JAXPR(jaxpr, [])


def traced_program(traced: Any) -> tuple[Any, dict[str, Any]]:
    """`(closed jaxpr, the jit's parameters)` of a `jax.jit(...).trace(...)`,
    its captured arrays as constants (`hoisted_constants`)."""
    if traced._consts:  # constants that are tracers: not a top-level program
        raise ValueError("a trace inside another trace")
    return hoisted_constants(traced.jaxpr), traced._params


def hoisted_constants(closed: Any) -> Any:
    """`closed` with every array its equations or outputs read as a literal made
    a constant. Under `jax_use_simplified_jaxpr_constants` (JAX's planned
    default) a captured array is written into the equations that read it; by
    default it is a constant, which keys, number sharing and diagnostics read as
    one. One form for both: scalars stay literals, as they always were."""
    jaxpr = closed.jaxpr
    constvars: list[Any] = []
    consts: list[Any] = []

    def an_array(x: Any) -> bool:
        return type(x) is LITERAL and getattr(x.aval, "shape", ()) != ()

    def hoisted(x: Any) -> Any:
        if not an_array(x):
            return x
        var = new_var(x.aval)
        constvars.append(var)
        consts.append(x.val)
        return var

    eqns = [
        eqn.replace(invars=list(map(hoisted, eqn.invars)))
        if any(map(an_array, eqn.invars))
        else eqn
        for eqn in jaxpr.eqns
    ]
    outvars = list(map(hoisted, jaxpr.outvars))
    if not constvars:
        return closed
    changes = {
        "constvars": [*jaxpr.constvars, *constvars],
        "outvars": outvars,
        "eqns": eqns,
    }
    consts = [*closed.consts, *consts]
    if CLOSED_JAXPR is JAXPR:  # constvars with no values would be plain inputs
        return jaxpr.replace(**changes, consts=consts)
    return CLOSED_JAXPR(jaxpr.replace(**changes), consts)


def plain_jit_options(params: dict[str, Any]) -> bool:
    """Whether a traced jit's parameters are those of `jax.jit(f, donate_argnums=...)`
    with no other option: no shardings, layouts, mesh, inlining or compiler
    options (what `_numbers` may compile a generalised program with)."""
    unspecified = all(
        type(s).__name__ == "UnspecifiedValue"
        for s in (*params.get("in_shardings", ()), *params.get("out_shardings", ()))
    )
    no_layouts = all(
        x is None
        for x in (*params.get("in_layouts", ()), *params.get("out_layouts", ()))
    )
    mesh = params.get("ctx_mesh")
    return (
        unspecified
        and no_layouts
        and (mesh is None or bool(getattr(mesh, "empty", False)))
        and not inlines(params.get("inline", False))
        and not params.get("compiler_options_kvs", ())
    )


# `jax.jit(f, inline=...)`. JAX 0.11 stores the option as a `jax.Inline` member
# (`False` becomes `Inline.AUTO`, and every member is truthy), and from 0.11.2
# `True` means `Inline.JAX_LATE`: inlined at lowering, so the trace keeps a
# nested jit equation with the inner constants and residuals. `marked_program`
# needs the inner function's equations in the outer trace, as `True` gave before.
_INLINE = getattr(jax, "Inline", None)
EARLY_INLINE: Any = True if _INLINE is None else _INLINE.JAX_EARLY


def inlines(option: Any) -> bool:
    """Whether a traced jit's `inline` parameter asks for any inlining (`False`
    on JAX < 0.11, `jax.Inline.AUTO` after, is the default of a plain jit)."""
    if _INLINE is not None and isinstance(option, _INLINE):
        return option is not _INLINE.AUTO
    return bool(option)


def new_var(aval: Any) -> Any:
    """A fresh jaxpr variable of this aval (what `_numbers` adds as an input)."""
    from jax._src import core

    return core.Var(aval)  # pyright: ignore[reportCallIssue]


def weakly_typed(x: Any) -> Any:
    """A traced scalar as a weakly typed value of its dtype, as the literal a
    Python number makes is (`_numbers` passes such a literal's value in as an
    input, and what the program computes from it must keep its type)."""
    from jax._src.lax import lax

    return lax._convert_element_type(x, weak_type=True)


def check_jaxpr(jaxpr: Any) -> None:
    """JAX's type check of a jaxpr: raises where JAX would not accept it."""
    from jax._src import core

    core.check_jaxpr(jaxpr)


def equation_frames(eqn: Any) -> list[tuple[str, int, str]]:
    """`(file, line, function)` of the Python frames that made a jaxpr equation,
    innermost first (its `source_info`, which JAX records for its error messages);
    empty where this JAX records them otherwise (a diagnostic then names no line)."""
    try:
        frames = eqn.source_info.traceback.frames
        return [(f.file_name, int(f.line_num), f.function_name) for f in frames]
    except Exception:
        return []


def traced_in_tree(traced: Any) -> Any:
    """The input treedef of a `jax.jit(...).trace(...)`: what its executable's
    calls must pass."""
    return traced.in_tree


def traced_out_tree(traced: Any) -> Any:
    """The output treedef of a `jax.jit(...).trace(...)` (its static nodes hold
    what this trace returned)."""
    return traced.out_tree


def can_share_compiles() -> bool:
    """Whether this JAX shows what `af.filter_jit` compares to share a compile:
    a traced `jax.jit`'s jaxpr, parameters and output tree (JAX 0.5 and later)."""
    from jax._src import util

    # Without this hook `jax.clear_caches()` could not make shared calls trace
    # again, as it makes `jax.jit` trace again.
    if TOP_LEVEL_STATE is None or not hasattr(util, "register_cache"):
        return False
    try:
        traced = jax.jit(_identity).trace(np.float32(0))
        traced_program(traced)
        traced_in_tree(traced)
        traced_out_tree(traced)
        traced.lower().compile()
    except (AttributeError, TypeError, ValueError):
        return False
    return True


def _identity(x: Any) -> Any:
    return x


def register_cache_clear(clear: Callable[[], None]) -> None:
    """Have `eqx.clear_caches()` clear `clear`'s cache too, as it clears its own."""
    from equinox._caches import cache_clears

    cache_clears.append(clear)


def register_jax_cache(cache: Any) -> None:
    """Have `jax.clear_caches()` call `cache.cache_clear()`, as it clears its own
    caches of traces and executables (held weakly)."""
    from jax._src import util

    register = getattr(util, "register_cache", None)
    if register is not None:  # older JAX: no hook, and no compile is shared there
        register(cache, "af.filter_jit")


def hide_from_tracebacks(filename: str) -> None:
    """Leave `filename`'s frames out of JAX's tracebacks and equinox's error stacks."""
    from jax._src import traceback_util

    traceback_util.register_exclusion(filename)


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
    expected = {"_cached", "_dynamic_fun", "_static_fun"}
    if not callable(cls.__dict__.get("__call__")) or not expected <= fields:
        raise RuntimeError(
            "equinox._jit._JitWrapper no longer defines __call__, _cached, "
            "_dynamic_fun and _static_fun as arrayfield.explain_retraces and "
            "af.filter_jit expect; pin equinox to a supported version."
        )
    jit = _equinox_jit()
    names = (
        "last_error_info",
        "_on_error_msg",
        "EquinoxRuntimeError",
        "_FilterCallback",
    )
    if not all(hasattr(jit, name) for name in names):
        raise RuntimeError(
            f"equinox._jit no longer has all of {', '.join(names)}: "
            "af.filter_jit cannot report eqx.error_if failures as eqx.filter_jit "
            "does; pin equinox to a supported version."
        )
    samples = (jax.numpy.ones(2), np.zeros(2), np.float32(1), 1, 1.0, True, "a", None)
    if [is_traced_leaf(x) for x in samples] != [equinox.is_array(x) for x in samples]:
        raise RuntimeError(
            "arrayfield's reading of equinox._filters._ARRAY_TYPES no longer agrees "
            "with eqx.is_array: af.filter_jit and the diagnostics cannot tell which "
            "leaves eqx.filter_jit traces; pin equinox to a supported version."
        )
    try:
        from equinox._caches import cache_clears  # noqa: F401
        from equinox._compile_utils import get_fn_names  # noqa: F401
        from jax._src.traceback_util import register_exclusion  # noqa: F401
    except ImportError as error:
        raise RuntimeError(
            f"af.filter_jit needs a helper that moved in equinox or JAX ({error}); "
            "pin equinox and JAX to supported versions."
        ) from None
