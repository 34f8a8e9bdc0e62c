"""`explain_retraces`: say, field by field, why a jitted function was traced again.

How it stays free on the hot path: a trace is detected, not inferred. JAX reports
every top-level trace to a `jax.monitoring` listener, which bumps a per-thread
counter (`_hooks.py`). A watched call reads that counter before and after; only
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

import dataclasses
import functools
import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar, overload

import jax
import jax.numpy
import jax.tree_util as jtu
import numpy as np

from . import _hooks
from ._convert import canonical_dtype
from ._env import EXPLAIN_RETRACES, env_flag
from ._errors import (
    EQUINOX_DIR,
    JAX_DIR,
    class_name,
    format_annotation,
    short_repr,
    warn_in_user_code,
)
from ._paths import FieldRef, bind_arguments, is_array, walk
from ._spec import Unresolved, field_spec, resolve_annotation

ENV_VAR = EXPLAIN_RETRACES

# How many earlier signatures per function a new trace is compared against.
_HISTORY = 32

_NUMBERS = (bool, int, float, complex)

# Which jit a site's traces come from; the reasons name it. None: not known (a
# plain function traced by whatever jit its caller uses).
FILTER_JIT = "eqx.filter_jit"
JAX_JIT = "jax.jit"

# Public names: the API reference shows them in `explain_retraces`'s signatures.
Function = TypeVar("Function", bound=Callable[..., Any])


class RetraceWarning(UserWarning):
    """A jitted function was traced (and compiled) again; the message says why.

    Issued by `af.explain_retraces` on every trace after a function's first one. It
    names the function and, for each argument leaf that differs from the closest
    earlier call that traced, its path, old and new value, the reason and a fix.
    Turn it into an error in tests with `pytest -W error::arrayfield.RetraceWarning`
    (plain `python -W` cannot name a warning class outside the standard library).

    !!! example

        ```python
        import warnings
        import equinox as eqx
        import jax.numpy as jnp
        import arrayfield as af

        step = af.explain_retraces(eqx.filter_jit(lambda x, n: x * n))
        with warnings.catch_warnings():
            warnings.simplefilter("error", af.RetraceWarning)
            step(jnp.ones(2), 2)
            try:
                step(jnp.ones(2), 3)  # a new Python int: traced again
            except af.RetraceWarning as warning:
                assert "n: 2 -> 3" in str(warning)
        ```
    """

    __module__ = "arrayfield"  # tracebacks and reprs show the public name


class TraceReuseWarning(RetraceWarning):
    """A call reused a trace compiled for arguments of another type.

    `1`, `1.0` and `True` compare equal and hash alike, so `eqx.filter_jit` finds
    the trace compiled for one of them when called with another: no retrace
    happens, and the computation runs with the dtypes of the earlier call. A
    subclass of `RetraceWarning`, so one warning filter covers both.

    !!! example

        ```python
        import warnings
        import equinox as eqx
        import jax.numpy as jnp
        import arrayfield as af

        step = af.explain_retraces(eqx.filter_jit(lambda x, k: x * k))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step(jnp.ones(2, dtype=jnp.int32), 1)
            out = step(jnp.ones(2, dtype=jnp.int32), 1.5 - 0.5)  # 1.0 == 1
        assert out.dtype == jnp.int32  # the int trace ran
        assert caught[0].category is af.TraceReuseWarning
        ```
    """

    __module__ = "arrayfield"  # tracebacks and reprs show the public name


# -- signatures -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _LeafSig:
    """What the jit cache sees of one leaf: an abstract array or a hashed value."""

    kind: str  # "array", "hashed" (a non-array leaf) or "static" (a static field)
    key: Any  # (shape, dtype, weak_type) for arrays, the value itself otherwise
    type: type
    text: str
    field: FieldRef | None
    scalar: Any = None  # a Python number that jax.jit traced (its value, kept)

    def same(self, other: _LeafSig) -> bool:
        if self.kind != other.kind:
            return False
        if self.kind == "array":
            return self.key == other.key
        return _equal(self.key, other.key)


def _equal(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b) and hash(a) == hash(b)
    except Exception:
        return False


def _canonical(dtype: Any) -> Any:
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        return dtype  # extended dtypes (PRNG keys) are already what jit sees
    return canonical_dtype(dtype)


def _array_key(x: Any) -> tuple[tuple[int, ...], Any, bool]:
    aval = getattr(x, "aval", None)
    if aval is not None:  # tracers and jax arrays
        return tuple(aval.shape), aval.dtype, bool(getattr(aval, "weak_type", False))
    return tuple(np.shape(x)), _canonical(x.dtype), False


def _scalar_key(x: Any) -> tuple[tuple[int, ...], Any, bool]:
    """How `jax.jit` sees a Python number it traces: a weakly typed 0-d array."""
    dtype = {bool: np.bool_, int: np.int64, float: np.float64, complex: np.complex128}
    return (), _canonical(dtype[type(x)]), type(x) is not bool


@dataclasses.dataclass
class _Signature:
    leaves: dict[str, _LeafSig]
    structure: dict[str, Any]  # parameter name -> treedef
    has_numbers: bool
    # For the per-call reuse check: the flat view `jtu.tree_flatten` gives.
    treedef: Any
    arrays: tuple[tuple[int, Any], ...]  # (leaf index, (shape, dtype, weak_type))
    hashed: tuple[tuple[int, Any, type], ...]  # (leaf index, value, type)

    def reused_by(self, flat: list[Any], treedef: Any) -> bool:
        """Whether a call with these flat leaves hits the trace this call made."""
        return (
            self.treedef == treedef
            and all(
                is_array(flat[i]) and _array_key(flat[i]) == key
                for i, key in self.arrays
            )
            and all(
                not is_array(flat[i]) and _equal(value, flat[i])
                for i, value, _ in self.hashed
            )
        )


def _describe_leaf(value: Any, kind: str, field: FieldRef | None) -> _LeafSig:
    return _LeafSig(kind, value, type(value), short_repr(value), field)


def _signature(
    arguments: dict[str, Any], args: tuple, kwargs: dict, traced_scalars: bool
) -> _Signature:
    leaves: dict[str, _LeafSig] = {}
    structure: dict[str, Any] = {}
    has_numbers = False
    for name, value in arguments.items():
        found, statics = walk(value, name)
        structure[name] = jtu.tree_structure(value)
        for leaf in found:
            x = leaf.value
            if is_array(x):
                sig = _LeafSig("array", _array_key(x), type(x), _array_text(x), None)
            elif traced_scalars and type(x) in _NUMBERS:
                sig = _LeafSig("array", _scalar_key(x), type(x), repr(x), None, x)
            else:
                sig = _describe_leaf(x, "hashed", leaf.field)
                has_numbers = has_numbers or type(x) in _NUMBERS
            leaves[leaf.path] = sig
        for static in statics:
            leaves[static.path] = _describe_leaf(static.value, "static", static.field)
    flat, treedef = jtu.tree_flatten((args, kwargs))
    arrays = tuple((i, _array_key(x)) for i, x in enumerate(flat) if is_array(x))
    hashed = tuple((i, x, type(x)) for i, x in enumerate(flat) if not is_array(x))
    return _Signature(leaves, structure, has_numbers, treedef, arrays, hashed)


def _array_text(x: Any) -> str:
    shape, dtype, weak = _array_key(x)
    text = short_repr(jax.ShapeDtypeStruct(shape, dtype))
    return f"weak {text}" if weak else text


# -- differences ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Change:
    path: str
    old: str
    new: str
    why: str
    fix: str


def _diff(
    old: _Signature, new: _Signature, jit: str | None, scalar_values: bool = False
) -> list[_Change]:
    changes: list[_Change] = []
    for path, n in new.leaves.items():
        o = old.leaves.get(path)
        if o is None:
            changes.append(
                _Change(
                    path,
                    "(absent)",
                    n.text,
                    "pytree structure changed: this leaf appeared (it was None, "
                    "or the field, key or element did not exist)",
                    _STRUCTURE_FIX,
                )
            )
        elif not o.same(n):
            changes.append(_leaf_change(path, o, n, jit))
        elif scalar_values and n.scalar is not None and not _equal(o.scalar, n.scalar):
            changes.append(
                _Change(
                    path,
                    o.text,
                    n.text,
                    "value changed; jax.jit traces a Python number unless its "
                    "argument is static (static_argnums/static_argnames), and a "
                    "static argument's value is hashed into the cache key",
                    "pass an array, jnp.asarray(x), if the value changes per call",
                )
            )
    for path, o in old.leaves.items():
        if path not in new.leaves:
            changes.append(
                _Change(
                    path,
                    o.text,
                    "(absent)",
                    "pytree structure changed: this leaf disappeared (it is None "
                    "now, or the field, key or element is gone)",
                    _STRUCTURE_FIX,
                )
            )
    if not changes:
        for name, treedef in new.structure.items():
            before = old.structure.get(name)
            if before is not None and before != treedef:
                old_text, new_text = short_repr(before, 120), short_repr(treedef, 120)
                same_names = str(before) == str(treedef)
                changes.append(
                    _Change(
                        name,
                        old_text,
                        new_text,
                        "pytree structure changed: same class names, different "
                        "class objects (a class made anew, e.g. by type(...) in "
                        "a function, on every call)"
                        if same_names
                        else "pytree structure changed (container types or the "
                        "order of keys), with the same leaves",
                        "make each class once, at module level or in a "
                        "functools.cache'd factory"
                        if same_names
                        else _STRUCTURE_FIX,
                    )
                )
    return changes


_STRUCTURE_FIX = (
    "keep the structure fixed from call to call: store an array instead of "
    "switching between None and an array, and keep the same keys and fields"
)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _leaf_change(path: str, o: _LeafSig, n: _LeafSig, jit: str | None) -> _Change:
    new_text = n.text
    if new_text == o.text and n.kind != "array":
        new_text += " (a new object)"  # e.g. a fresh functools.partial: same repr
    if o.kind == "array" and n.kind == "array":
        (o_shape, o_dtype, o_weak), (n_shape, n_dtype, _) = o.key, n.key
        if o_shape != n_shape:
            why = (
                "shape changed; arrays are traced by shape, so each new shape compiles"
            )
            fix = "pad or bucket inputs to a few fixed shapes"
        elif o_dtype != n_dtype:
            why = (
                "dtype changed; arrays are traced by dtype, so each new dtype compiles"
            )
            fix = "cast to one dtype before the call, e.g. x.astype(jnp.float32)"
        else:
            strong, weak = ("weak", "strong") if o_weak else ("strong", "weak")
            why = (
                f"weak/strong type flip: the array was {strong}ly typed before and is "
                f"{weak}ly typed now; weak_type is part of the compiled signature "
                "(weak arrays come from Python scalars, e.g. jnp.asarray(1.0))"
            )
            fix = (
                "create it with an explicit dtype, jnp.asarray(x, dtype=jnp.float32), "
                "or pass the Python number itself to an af.ArrayModule array field, "
                "which stores it strongly typed (a weak array you pass is kept weak)"
            )
        return _Change(path, o.text, n.text, why, fix)
    if n.kind == "static" or o.kind == "static":
        return _Change(
            path,
            o.text,
            new_text,
            "a static=True field is part of the cache key, and its value changed",
            "expected if it is a setting that takes a few values; if it changes "
            "from step to step, make it an ordinary array field",
        )
    if n.kind == "hashed":
        why, fix = _hashed_reason(n, o.kind == "array", jit)
        return _Change(path, o.text, new_text, why, fix)
    kind = o.type.__name__
    return _Change(  # a hashed value became an array
        path,
        o.text,
        n.text,
        f"was {_article(kind)} {kind} (hashed into the cache key), is an array now",
        "pass the same kind of value every call; an array every time is best",
    )


_STATIC_FIX = (
    "if it changes from call to call, take it out of static_argnums/static_argnames "
    "so that jax.jit traces it"
)


def _hashed_reason(n: _LeafSig, was_array: bool, jit: str | None) -> tuple[str, str]:
    kind = n.type.__name__
    if type(n.key) in _NUMBERS:
        if was_array:
            why = f"was an array, is a Python {kind} now (hashed into the cache key)"
        elif jit == JAX_JIT:
            why = (
                f"a static argument of jax.jit (static_argnums/static_argnames) is "
                f"hashed into the cache key, so every new value of this Python {kind} "
                "compiles again"
            )
            return why, _STATIC_FIX
        elif jit == FILTER_JIT:
            why = (
                f"a Python {kind} is not an array, so eqx.filter_jit hashes its value "
                "into the cache key: every new value compiles again"
            )
        else:
            why = (
                f"a Python {kind} that the jit does not trace is hashed into the cache "
                "key (eqx.filter_jit hashes every non-array leaf, jax.jit its static "
                "arguments): every new value compiles again"
            )
        return why, number_fix(n.field, n.key)
    if callable(n.key):
        return (
            "a different callable object: functions, lambdas and functools.partial "
            "objects are hashed by identity, so a fresh one per call compiles again",
            "create the closure or partial once, outside the loop, or make it an "
            "eqx.Module (or eqx.Partial) so the values it captures are traced",
        )
    a_kind = f"{_article(kind)} {kind}"
    if jit == JAX_JIT:
        why = (
            f"{a_kind} static argument of jax.jit is hashed into the cache key, and "
            "its value changed"
        )
        return why, _STATIC_FIX
    if jit == FILTER_JIT:
        why = (
            f"{a_kind} is not an array, so filter_jit hashes it into the cache key, "
            "and its value changed"
        )
    else:
        why = (
            f"{a_kind} is not traced by the jit, so it is hashed into the cache "
            "key, and its value changed"
        )
    return (
        why,
        "keep values that change from call to call out of the jitted arguments "
        "(or make them arrays); mark fixed settings eqx.field(static=True)",
    )


def number_fix(field: FieldRef | None, value: Any = None) -> str:
    """How to stop a Python number in this position from being hashed. An int
    may be a shape, size or id, which must stay a Python int: no array advice."""
    if field is None and type(value) is int:
        return (
            "if this int is a shape, size, count or id, keep it static "
            "(static_argnums, eqx.field(static=True)); if it changes every call, "
            "pass an array, jnp.asarray(x, dtype=...)"
        )
    if field is None:
        return (
            "pass an array instead, jnp.asarray(x, dtype=...), or store the value "
            "in an af.ArrayModule field"
        )
    annotation = field.annotation
    try:
        resolved = resolve_annotation(annotation, field.declared_in)
    except Unresolved:
        resolved = annotation
    spelled = format_annotation(annotation)
    spec = field_spec(resolved)
    if spec is not None:
        from ._module import ArrayModule

        if any(t in _NUMBERS for t in getattr(spec, "passthrough", ())):
            return (
                f"{field.where} is annotated {spelled}, which names a Python number "
                "type, so a Python number is stored as it is: drop the number type "
                '(e.g. Float[Array, ""]) on an af.ArrayModule to store it as an '
                "array, or pass an array"
            )
        if not issubclass(field.owner, ArrayModule):
            return (
                f"{field.where} is annotated {spelled} but holds a Python number: "
                f"subclass af.ArrayModule instead of eqx.Module, and it is stored "
                f"as a strongly typed array{field.declared}"
            )
        return (
            f"{field.where} is annotated {spelled} but is not converted "
            "(af.field(convert=False)?); store an array in it"
        )
    if type(value) is int and not (
        isinstance(resolved, type) and issubclass(resolved, float | complex)
    ):
        return (
            f"{field.where} is annotated {spelled}: if this int is a shape, size, "
            "count or id, mark it eqx.field(static=True); only a value that "
            'changes every call, such as a step, belongs in an Int[Array, ""]'
            f"{field.declared}"
        )
    if isinstance(resolved, type) and issubclass(resolved, _NUMBERS):
        return (
            f'{field.where} is annotated {spelled}: annotate it Float[Array, ""] '
            '(or Int[Array, ""]) on an af.ArrayModule so it is stored as an array, '
            "or, if it is a flag or setting, mark it eqx.field(static=True)"
            f"{field.declared}"
        )
    return (
        f"store an array in {field.where} (annotated {spelled}), e.g. "
        "jnp.asarray(x, dtype=...)"
    )


def _closest(
    history: list[_Signature], new: _Signature, jit: str | None
) -> tuple[_Signature, list[_Change]]:
    best: tuple[_Signature, list[_Change]] | None = None
    for old in reversed(history):  # latest first, so ties go to the latest
        changes = _diff(old, new, jit)
        if best is None or len(changes) < len(best[1]):
            best = (old, changes)
    assert best is not None
    return best


# -- per-function record ------------------------------------------------------------


def _location(fn: Any) -> str:
    """`qualname (file:line)` of the Python function behind a (jitted) callable."""
    target = fn
    for _ in range(10):
        if isinstance(target, functools.partial):
            target = target.func
        elif hasattr(target, "__wrapped__"):
            target = target.__wrapped__
        else:
            break
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    code = getattr(target, "__code__", None)
    if code is None:
        return name
    filename = code.co_filename
    try:
        relative = os.path.relpath(filename)
        if not relative.startswith(".."):
            filename = relative
    except ValueError:  # another drive on Windows
        pass
    return f"{name} ({filename}:{code.co_firstlineno})"


# af.filter_jit's module, by path: importing it here would load it eagerly.
_AF_FILTER_JIT_FILE = os.path.join(os.path.dirname(__file__), "_jit.py")


def _calling_jit() -> str | None:
    """Which jit is tracing the plain function whose wrapper called this."""
    caller = sys._getframe(2).f_code.co_filename  # the wrapper's caller
    if caller.startswith(EQUINOX_DIR) or caller == _AF_FILTER_JIT_FILE:
        return FILTER_JIT
    if caller.startswith(JAX_DIR):
        return JAX_JIT
    return None  # called from the user's own jitted function: any jit


class _Site:
    """What one watched function has traced with (its last few signatures)."""

    def __init__(self, fn: Any, jit: str | None, keep_alive: Any = None):
        self.fn = fn
        self.jit = jit
        self.traced_scalars = jit == JAX_JIT  # jax.jit traces Python numbers
        self.keep_alive = keep_alive  # pins the object whose id keys this site
        self.history: list[_Signature] = []
        self.check_reuse = False
        self.reported: set[tuple[int, tuple[type, ...]]] = set()
        self.lock = threading.Lock()
        self.shared = False  # also used by the `with` block's hook (see _wrap_jitted)
        self.last_trace = -1  # for a plain function: the top-level trace it was in

    def arguments(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        return bind_arguments(self.fn, args, kwargs)

    def traced(
        self,
        args: tuple,
        kwargs: dict,
        extra: dict[str, Any],
        jit: str | None = None,
        quiet: bool = False,
    ) -> bool:
        """This call traced: compare it with the earlier ones, then remember it.

        Returns whether it warned; `quiet` only remembers (an inner wrapper warned).
        """
        arguments = {**extra, **self.arguments(args, kwargs)}
        new = _signature(arguments, args, kwargs, self.traced_scalars)
        with self.lock:
            history = list(self.history)
            self.history.append(new)
            del self.history[:-_HISTORY]
            self.check_reuse = self.check_reuse or new.has_numbers
        if not history or quiet:
            return False
        jit = jit or self.jit
        _, changes = _closest(history, new, jit)
        if not changes and self.traced_scalars:
            changes = min(
                (_diff(old, new, jit, scalar_values=True) for old in history), key=len
            )
        warn_in_user_code(RetraceWarning(self._message(changes)))
        return True

    def _message(self, changes: list[_Change]) -> str:
        head = f"{_location(self.fn)} was traced and compiled again."
        if not changes:
            causes = (
                "a new jit wrapper around the same function (eqx.filter_jit or "
                "jax.jit called inside a loop), jax.clear_caches(), or different "
                "jit options"
            )
            if self.jit is None:
                causes = (
                    "the jitted function that calls it was traced again for its "
                    f"own arguments, {causes}"
                )
            return (
                f"{head} No argument differs from an earlier call that traced, so "
                f"the cause is outside the arguments: {causes}."
            )
        lines = [f"{head} Compared with the closest earlier call:"]
        for c in changes:
            lines.append(f"  {c.path}: {c.old} -> {c.new}")
            lines.append(f"    why: {c.why}.")
            lines.append(f"    fix: {c.fix}.")
        return "\n".join(lines)

    def check_hit(self, args: tuple, kwargs: dict) -> None:
        """This call hit the cache: did it reuse a trace made for other types?"""
        flat, treedef = jtu.tree_flatten((args, kwargs))
        for old in reversed(self.history):  # the latest trace is the one cached
            if old.reused_by(flat, treedef):
                break
        else:
            return  # no trace matches: evicted from the history, or not seen
        types = tuple(type(flat[i]) for i, _, _ in old.hashed)
        if old.has_numbers and types != tuple(t for _, _, t in old.hashed):
            self._report_reuse(old, args, kwargs, types)

    def _report_reuse(
        self,
        old: _Signature,
        args: tuple,
        kwargs: dict,
        types: tuple[type, ...],
    ) -> None:
        with self.lock:
            key = (id(old), types)
            if key in self.reported:
                return
            self.reported.add(key)
        new = _signature(self.arguments(args, kwargs), args, kwargs, False)
        lines = [
            f"{_location(self.fn)} reused a trace compiled for arguments of other "
            "types (no retrace happened):"
        ]
        for path, n in new.leaves.items():
            o = old.leaves.get(path)
            if o is None or n.kind != "hashed" or o.type is n.type:
                continue
            lines.append(
                f"  {path}: traced with {o.type.__name__} {o.text}, called with "
                f"{n.type.__name__} {n.text}"
            )
            lines.append(
                "    why: 1, 1.0 and True are equal and hash alike, so filter_jit "
                "runs the trace compiled for the earlier type; results follow "
                "that type's dtype."
            )
            lines.append(f"    fix: {number_fix(n.field)}.")
        warn_in_user_code(TraceReuseWarning("\n".join(lines)))


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
_decorated: weakref.WeakValueDictionary[int, _Site] = weakref.WeakValueDictionary()


def _wrap(fn: Function) -> Function:
    if _hooks.is_filter_jit(fn) or hasattr(fn, "lower"):
        return _wrap_jitted(fn)
    return _wrap_traced(fn)


def _wrap_jitted(fn: Any) -> Any:
    """Around a jitted callable: a call traced iff the trace counter moved."""
    is_filter_jit = _hooks.is_filter_jit(fn)
    site = _Site(fn, FILTER_JIT if is_filter_jit else JAX_JIT)
    if is_filter_jit:
        cache = _hooks.cache_of(fn)
        site.keep_alive, site.shared = cache, True
        _decorated[id(cache)] = site
    check = not site.traced_scalars  # jax.jit traces scalars: nothing to reuse
    _hooks.acquire_trace_counter()
    counter = _hooks.counter
    no_extra: dict[str, Any] = {}

    @functools.wraps(fn)
    def explained(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        before = counter.traces
        out = fn(*args, **kwargs)
        if counter.traces != before:
            if _thread.explained < before:  # else a `with` block's hook did
                site.traced(args, kwargs, no_extra)
        elif check and site.check_reuse:
            site.check_hit(args, kwargs)
        return out

    # The trace listener stays registered exactly as long as some wrapper lives.
    weakref.finalize(explained, _hooks.release_trace_counter)
    return explained


def _wrap_traced(fn: Any) -> Any:
    """Around a plain function that a jit traces: its first call in each jit trace.

    A call counts when it runs inside a jit trace (not under an eager `jax.grad`)
    and is the first one in that top-level trace: one trace may call it many times.
    """
    site = _Site(fn, jit=None)
    _hooks.acquire_trace_counter()
    counter = _hooks.counter
    in_jit_trace = _hooks.in_jit_trace
    no_extra: dict[str, Any] = {}

    @functools.wraps(fn)
    def explained(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        if in_jit_trace() and site.last_trace != counter.top_level:
            site.last_trace = counter.top_level
            if site.traced(args, kwargs, no_extra, jit=_calling_jit()):
                _thread.explained = counter.traces
        return fn(*args, **kwargs)

    weakref.finalize(explained, _hooks.release_trace_counter)
    return explained


# -- the context manager and the environment variable ------------------------------


class _Session:
    """The functions watched by one outermost `with` block (or by the process)."""

    def __init__(self) -> None:
        self.sites: dict[int, _Site] = {}
        self.lock = threading.Lock()

    def site_for(self, jit_wrapper: Any) -> _Site:
        cache = _hooks.cache_of(jit_wrapper)
        site = self.sites.get(id(cache))
        if site is None:
            with self.lock:
                site = self.sites.get(id(cache))
                if site is None:
                    # A decorated function keeps its own record (and no warning twice).
                    site = _decorated.get(id(cache)) or _Site(
                        jit_wrapper, FILTER_JIT, keep_alive=cache
                    )
                    self.sites[id(cache)] = site
        return site


_process_session: _Session | None = None


def _watching_call(original: Callable[..., Any]) -> Callable[..., Any]:
    """The `__call__` every `eqx.filter_jit` function has while watched."""
    counter = _hooks.counter
    cache_of = _hooks.cache_of

    def __call__(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        session = _thread.session or _process_session
        if session is None:
            return original(self, *args, **kwargs)
        site = session.sites.get(id(cache_of(self))) or session.site_for(self)
        before = counter.traces
        out = original(self, *args, **kwargs)
        if counter.traces != before:
            # The jitted callable is hashed into the key too: show it as an argument
            # (a decorator's record shows the arguments only, like the decorator).
            extra = {} if site.shared else {"<function>": self.__wrapped__}
            quiet = _thread.explained >= before  # a wrapped plain function warned
            if site.traced(args, kwargs, extra, quiet=quiet) or site.shared:
                _thread.explained = before
        elif site.check_reuse:
            site.check_hit(args, kwargs)
        return out

    return __call__


class RetraceWatch:
    """`with af.explain_retraces():` watches every filter_jit call in the block.

    Both `eqx.filter_jit` and `af.filter_jit` functions are watched.

    The block covers the thread that opens it. Blocks nest (an inner block shares
    the outer one's record), and leaving the outermost one removes every hook.
    """

    def __enter__(self) -> None:
        if _thread.depth == 0:
            _hooks.acquire_trace_counter()
            try:
                _hooks.install_call_hook(_watching_call)
            except BaseException:
                _hooks.release_trace_counter()
                raise
            _thread.session = _Session()
        _thread.depth += 1

    def __exit__(self, *exc_info: Any) -> None:
        _thread.depth -= 1
        if _thread.depth == 0:
            _thread.session = None
            _hooks.uninstall_call_hook()
            _hooks.release_trace_counter()

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
    environment variable set) warns once per retrace.

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
    return _wrap(fn)


def _enable_for_process() -> None:
    """Watch every `eqx.filter_jit` call in every thread, for good."""
    global _process_session
    if _process_session is not None:
        return
    _hooks.acquire_trace_counter()
    _hooks.install_call_hook(_watching_call)
    _process_session = _Session()


if env_flag(ENV_VAR):
    _enable_for_process()
