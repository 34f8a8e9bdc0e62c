"""JAX's private names that dispatch and diagnostics read, each through one
accessor here.

`af.filter_jit` reproduces `jax.jit`'s own decisions (which executable runs a
call, whether a call runs at the top level) and compares the programs traces
produce, which needs a few states and object models JAX does not document.
They are read when this module loads, which happens at the first use of
`af.filter_jit` or a diagnostic, never when ArrayModules are defined or built
(the fields need nothing private: `_facts`).

Every read is guarded. A name that moved is recorded in `MOVED` and replaced
by a stand-in that keeps the modules above importable; `dispatch_problem()`
then names it, with a behavioural probe run once (trace, read and compile a
tiny program through these accessors), and `af.filter_jit` runs as
`eqx.filter_jit` after one `CompatibilityWarning`. What only sharing compiles
needs has its own answer (`sharing_problem()`): sharing turns off, loudly, and
the calls stay exact.

docs/architecture.md lists every name read here; `tests/test_hidden_names.py`
hides each of them from arrayfield and checks the fallbacks.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.extend
import numpy as np

# What could not be read, as "module.name (error)", by what needs it: dispatch
# itself, sharing compiles, sharing by numbers (`*_problem()` name them).
MOVED: list[str] = []
_SHARING_MOVED: list[str] = []
NUMBERS_MOVED: list[str] = []


def _read(module: str, name: str, *, needed_by: list[str] = MOVED) -> Any:
    """`module.name`, or None (recorded in `needed_by`) where JAX has moved it."""
    try:
        value = getattr(__import__(module, globals(), None, [name], 0), name)
    except (ImportError, AttributeError) as error:
        needed_by.append(f"{module}.{name} ({type(error).__name__})")
        return None
    return value


def _optional(module: str, name: str) -> Any:
    """A name only some JAX versions have: None elsewhere, not a move."""
    return _read(module, name, needed_by=[])


def _attribute(
    module: Any, path: str, name: str, *, needed_by: list[str] = MOVED
) -> Any:
    """`name` of a module `_read` gave, or None, recorded in `needed_by` unless
    the module itself moved (then it was recorded already)."""
    value = getattr(module, name, None)
    if value is None and module is not None:
        needed_by.append(f"{path}.{name} (AttributeError)")
    return value


class _Stand:
    """Stands in for a class that moved: nothing is an instance of it."""


class _Off:
    """Stands in for `disable_jit` where it moved (never read: dispatch is off)."""

    value = False


# -- the states JAX's own dispatch reads -------------------------------------------

_config = _read("jax._src", "config")
_core = _read("jax._src", "core")

# `.value`: `jax.disable_jit()` is on. (Tested against None: a JAX config
# state refuses `bool()`.)
DISABLE_JIT: Any = _attribute(_config, "jax._src.config", "disable_jit")
if DISABLE_JIT is None:
    DISABLE_JIT = _Off()


def jit_disabled() -> bool:
    """Whether `jax.disable_jit()` is on: the state JAX's own jit reads (`_jit`'s
    hot path reads `DISABLE_JIT.value` inline)."""
    return bool(DISABLE_JIT.value)


# JAX's configuration as its jit cache keys it (x64, default device, ...): cheap,
# a tuple JAX keeps up to date.
trace_context: Callable[[], Any] = (
    _attribute(_config, "jax._src.config", "trace_context") or tuple
)

# `(trace state, its top value, axis-env state, its top value)`: at the top level
# when both states hold their top values (what JAX's `trace_state_clean()` tests,
# and only then does a call run an executable); None where JAX keeps them
# elsewhere, and then no compile is shared.
_TOP_NAMES = ("trace_state_strong_ref", "eval_trace", "axis_env_state", "top_axis_env")
TOP_LEVEL_STATE: tuple[Any, Any, Any, Any] | None = (
    tuple(getattr(_core, name) for name in _TOP_NAMES)  # type: ignore[assignment]
    if all(hasattr(_core, name) for name in _TOP_NAMES)
    else None
)

# JAX's current trace (telling a jit trace from an eager transformation).
TRACE_CTX: Any = getattr(_core, "trace_ctx", None)
DYNAMIC_JAXPR_TRACE: type = (
    _read("jax._src.interpreters.partial_eval", "DynamicJaxprTrace") or _Stand
)


def in_jit_trace() -> bool:
    """Whether the running code is being staged out by a jit (not run eagerly).

    Walks from JAX's current trace through the traces it forwards to (`grad` and
    `vmap` inside a jit forward to the jit's trace) looking for a jaxpr trace.
    """
    trace = TRACE_CTX.trace
    for _ in range(100):  # a bound: a trace that forwards to itself stops here
        if trace is None:
            break
        if isinstance(trace, DYNAMIC_JAXPR_TRACE):
            return True
        trace = getattr(trace, "parent_trace", None)
    return False


def at_top_level() -> bool:
    """Whether no trace is running (JAX's `trace_ctx.is_top_level()`)."""
    return bool(TRACE_CTX.is_top_level())


# -- the jaxpr object model ------------------------------------------------------

# JAX 0.11 merged `ClosedJaxpr` into `Jaxpr` (a jaxpr carries its constants);
# `jax.extend.core` keeps the old name as an alias of the new class, which type
# checkers do not see as exported. Both are read here, once.
JAXPR: type = jax.extend.core.Jaxpr
CLOSED_JAXPR: type = getattr(jax.extend.core, "ClosedJaxpr", JAXPR)
JAXPR_TYPES: tuple[type, ...] = tuple({JAXPR, CLOSED_JAXPR})
LITERAL: type = jax.extend.core.Literal
DROP_VAR: type = _attribute(_core, "jax._src.core", "DropVar") or _Stand
# Program keys and generalised programs make variables and type-check: without
# these, nothing is shared (calls stay exact).
_VAR: Any = _attribute(_core, "jax._src.core", "Var", needed_by=_SHARING_MOVED)
_CHECK_JAXPR: Any = _attribute(
    _core, "jax._src.core", "check_jaxpr", needed_by=_SHARING_MOVED
)


def closed_jaxpr(jaxpr: Any) -> Any:
    """`jaxpr`, whose constants are all inputs now, as jit's `jaxpr` parameter
    holds a program: itself where the two classes are one (JAX 0.11+; replacing
    its constvars dropped any constants it carried), wrapped with no constants
    before."""
    return jaxpr if CLOSED_JAXPR is JAXPR else CLOSED_JAXPR(jaxpr, [])


def replaced(node: Any, **changes: Any) -> Any:
    """A jaxpr or equation with some of its fields changed (its `.replace`)."""
    return node.replace(**changes)


def literal(value: Any, aval: Any) -> Any:
    """A jaxpr literal holding `value` with this aval."""
    return LITERAL(value, aval)


def strongly_typed(aval: Any) -> Any:
    """`aval` without the weak type a Python number's literal carries."""
    return aval.update(weak_type=False)


def with_arg_names(debug_info: Any, names: tuple[str, ...]) -> Any:
    """A jaxpr's debug info naming its inputs `names` (what JAX's error messages
    print for a program's arguments)."""
    return debug_info._replace(arg_names=names)


def new_var(aval: Any) -> Any:
    """A fresh jaxpr variable of this aval (what `_numbers` adds as an input)."""
    return _VAR(aval)


def weakly_typed(x: Any) -> Any:
    """A traced scalar as a weakly typed value of its dtype, as the literal a
    Python number makes is (`_numbers` passes such a literal's value in as an
    input, and what the program computes from it must keep its type)."""
    return _CONVERT_ELEMENT_TYPE(x, weak_type=True)


_CONVERT_ELEMENT_TYPE: Any = _read(
    "jax._src.lax.lax", "_convert_element_type", needed_by=NUMBERS_MOVED
)


def check_jaxpr(jaxpr: Any) -> None:
    """JAX's type check of a jaxpr: raises where JAX would not accept it."""
    _CHECK_JAXPR(jaxpr)


def equation_frames(eqn: Any) -> list[tuple[str, int, str]]:
    """`(file, line, function)` of the Python frames that made a jaxpr equation,
    innermost first (its `source_info`, which JAX records for its error messages);
    empty where this JAX records them otherwise (a diagnostic then names no line)."""
    try:
        frames = eqn.source_info.traceback.frames
        return [(f.file_name, int(f.line_num), f.function_name) for f in frames]
    except Exception:
        return []


# -- what a traced jax.jit holds ---------------------------------------------------


def traced_program(traced: Any) -> tuple[Any, dict[str, Any]]:
    """`(closed jaxpr, the jit's parameters)` of a `jax.jit(...).trace(...)`,
    its captured arrays as constants (`hoisted_constants`)."""
    if traced._consts:  # constants that are tracers: not a top-level program
        raise ValueError("a trace inside another trace")
    return hoisted_constants(traced.jaxpr), traced._params


def traced_in_tree(traced: Any) -> Any:
    """The input treedef of a `jax.jit(...).trace(...)`: what its executable's
    calls must pass."""
    return traced.in_tree


def traced_out_tree(traced: Any) -> Any:
    """The output treedef of a `jax.jit(...).trace(...)` (its static nodes hold
    what this trace returned)."""
    return traced.out_tree


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
        replaced(eqn, invars=list(map(hoisted, eqn.invars)))
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
        return replaced(jaxpr, **changes, consts=consts)
    return CLOSED_JAXPR(replaced(jaxpr, **changes), consts)


# Whether an array is committed to its device(s) (then its sharding joins the
# executable's key, as in `jax.jit`): public `.committed` where JAX has it.
COMMITTED_ATTRIBUTE = "committed" if hasattr(jax.Array, "committed") else "_committed"


def committed(x: Any) -> bool:
    """Whether `x` (an array, or a NumPy value: never) is committed."""
    return bool(getattr(x, COMMITTED_ATTRIBUTE, False))


# `_jit`'s hot path: the class of every concrete JAX array, whose exact type
# test stands for `isinstance(x, jax.Array)`. `jax.Array` where it moved: the
# test is never true and every call takes the slower, as correct, path.
ARRAY_IMPL: type = _optional("jax._src.array", "ArrayImpl") or jax.Array


# -- jit's options -------------------------------------------------------------

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


# JAX's data types whose `==` compares what lowering reads (`_program_key`).
VALUE_PARAM_TYPES: frozenset[type] = frozenset(
    {
        getattr(_core, "ShapedArray", None),
        jax.sharding.NamedSharding,
        # Its public name is deprecated from JAX 0.12.1 (and warns when read).
        _optional("jax._src.sharding_impls", "SingleDeviceSharding"),
        jax.sharding.PartitionSpec,
        _optional("jax._src.mesh", "Mesh"),
        _optional("jax._src.mesh", "AbstractMesh"),
        _optional("jax._src.named_sharding", "UnspecifiedValue"),
        _optional("jax._src.sharding_impls", "UnspecifiedValue"),
        _optional("jax._src.sharding_impls", "GSPMDSharding"),
        _optional("jax._src.layout", "Layout"),
        _optional("jax._src.layout", "Format"),
    }
    - {None}
)


def _reads_only(lowering: Callable[..., Any], name: str) -> bool:
    """Whether a lowering rule's keyword parameters are `name` and `**_` alone."""
    kinds = {
        p.name: p.kind
        for p in inspect.signature(lowering).parameters.values()
        if p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD)
    }
    keywords = [n for n, k in kinds.items() if k is inspect.Parameter.KEYWORD_ONLY]
    return keywords == [name]


def _inert_params() -> dict[str, frozenset[str]]:
    # The differentiation rules of custom_jvp/custom_vjp equations, new objects in
    # every trace: inert where their lowering reads the primal jaxpr alone (it
    # takes `call_jaxpr` and ignores the rest), as JAX 0.7 and later do. Where
    # that cannot be shown they are compared by identity: no sharing of such
    # programs, never a wrong one.
    lowering = _optional("jax._src.custom_derivatives", "_custom_jvp_vjp_call_lowering")
    try:
        proved = lowering is not None and _reads_only(lowering, "call_jaxpr")
    except (TypeError, ValueError):
        proved = False
    if not proved:
        return {}
    return {
        "custom_jvp_call": frozenset({"jvp_jaxpr_fun", "jvp_jaxpr_thunk"}),
        "custom_vjp_call": frozenset({"fwd_jaxpr_thunk", "bwd", "out_trees"}),
    }


INERT_PARAMS: dict[str, frozenset[str]] = _inert_params()


# What older JAX (0.4) called `jax.monitoring.unregister_event_duration_listener`
# (`_tracing` reads the public name first).
OLD_UNREGISTER_DURATION: Any = _optional(
    "jax._src.monitoring", "_unregister_event_duration_listener_by_callback"
)


# -- process-wide hooks ------------------------------------------------------------

_util = _read("jax._src", "util", needed_by=_SHARING_MOVED)
_REGISTER_CACHE: Any = getattr(_util, "register_cache", None)
_REGISTER_EXCLUSION: Any = _read("jax._src.traceback_util", "register_exclusion")


def register_jax_cache(cache: Any) -> None:
    """Have `jax.clear_caches()` call `cache.cache_clear()`, as it clears its own
    caches of traces and executables (held weakly). Without the hook no compile
    is shared (`sharing_problem`), so nothing would outlive a clear."""
    if _REGISTER_CACHE is not None:
        _REGISTER_CACHE(cache, "af.filter_jit")


def hide_from_tracebacks(filename: str) -> None:
    """Leave `filename`'s frames out of JAX's tracebacks and equinox's error stacks."""
    if _REGISTER_EXCLUSION is not None:
        _REGISTER_EXCLUSION(filename)


# -- the probes --------------------------------------------------------------------


def _identity(x: Any) -> Any:
    return x


@functools.cache
def dispatch_problem() -> str | None:
    """What stops `af.filter_jit` from dispatching on its own on this JAX, or None.

    Names that moved, else a behavioural probe of the states dispatch reads: the
    top level reads as the top level, a jit's trace as a jit's trace.
    """
    if MOVED:
        return "moved: " + ", ".join(MOVED)
    try:
        if TRACE_CTX is None or not at_top_level() or in_jit_trace():
            return "jax._src.core.trace_ctx does not read as the top level"
        if jit_disabled():
            return None  # the probe below would run eagerly; the names are there
        seen: list[bool] = []
        jax.jit(lambda x: seen.append(in_jit_trace()) or x).trace(np.float32(0))
        if seen != [True]:
            return "jax._src.core.trace_ctx no longer shows a jit trace"
    except Exception as error:  # any failure is a reason to fall back
        return f"reading JAX's trace state failed ({type(error).__name__}: {error})"
    return None


@functools.cache
def sharing_problem() -> str | None:
    """What stops `af.filter_jit` from sharing compiles on this JAX, or None:
    names that moved, else a tiny `jax.jit` traced, its program read and type
    checked, and compiled, through these accessors."""
    problem = dispatch_problem()
    if problem is not None:
        return problem
    if _SHARING_MOVED:
        return "moved: " + ", ".join(_SHARING_MOVED)
    if TOP_LEVEL_STATE is None:
        return "jax._src.core no longer holds the trace states jax.jit reads"
    if _REGISTER_CACHE is None:
        # Without this hook `jax.clear_caches()` could not make shared calls
        # trace again, as it makes `jax.jit` trace again.
        return "jax._src.util.register_cache is gone"
    try:
        traced = jax.jit(_identity).trace(np.float32(0))
        closed, _ = traced_program(traced)
        check_jaxpr(closed.jaxpr)
        traced_in_tree(traced)
        traced_out_tree(traced)
        traced.lower().compile()
    except Exception as error:
        return f"reading a traced jax.jit failed ({type(error).__name__}: {error})"
    return None
