"""Layouts: the compiled caches `af.filter_jit` keeps, one per function and
its sharing options, as `eqx.filter_jit` keeps one `jax.jit` per function; and
whether this JAX and equinox let dispatch stand on its own and share compiles
(each asked once, at the first wrapper, and named in one warning where not).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import types
import weakref
from typing import Any

import jax
import numpy as np

from . import _eqx_private, _facts, _jax_private, _numbers, _program
from ._errors import CompatibilityWarning, versions, warn_in_user_code
from ._program import Compiled, marked_program, user_program


def number_free(treedef: Any) -> Any:
    """`treedef` with every Python number in its nodes' data (a static field's
    origin, `eqx.field(static=True)`) replaced by its type: two call structures
    that differ only in such numbers have one key. Walked once per new key,
    that is once per trace."""
    kind, data = treedef.node_data() or (None, None)
    children = tuple(number_free(child) for child in treedef.children())
    return kind, _without_numbers(data), children


def _without_numbers(data: Any) -> Any:
    if type(data) in _facts.PYTHON_NUMBERS:
        return type(data)
    if isinstance(data, (tuple, list)):  # a dict's keys come as a list
        return tuple(_without_numbers(x) for x in data)
    if isinstance(data, dict):  # equinox before 0.13 keeps `__annotations__`
        return tuple((key, _without_numbers(x)) for key, x in data.items())
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        # equinox before 0.13 keeps a Module's static values in a dataclass
        fields = dataclasses.fields(data)
        return type(data), tuple(
            _without_numbers(getattr(data, f.name)) for f in fields
        )
    return data


class Layout:
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
        "latest",
        "mixed",
        "number_retraces",
        "numbers",
        "share",
        "static_fun",
        "warned",
    )

    def __init__(
        self,
        static_fun: Any,
        donate_first: bool,
        donate_rest: bool,
        share: bool,
        numbers: bool,
    ):
        self.static_fun = static_fun
        self.donate_first = donate_first
        self.donate_rest = donate_rest  # every donating option donates the rest
        fun_has_arrays = any(leaf is None for leaf in static_fun[0])
        self.fun_at: int | None = (
            1 if donate_first else 0 if fun_has_arrays or donate_rest else None
        )
        self.jits: dict[tuple, Compiled] = {}
        # `(treedef, static leaves)` of the newest key of each tree structure,
        # numbers in static fields aside (`number_free`): what a new key is
        # compared with (`_count_number_retrace`), without a pass over `jits`,
        # which grows with every key a survey makes.
        self.latest: dict[Any, tuple] = {}
        # Whether calls run executables shared by program (`share_compiles`),
        # and by programs that differ only in numbers (`share_numbers`).
        self.share = share
        self.numbers = numbers
        # Whether a wrapper whose static part is equal to `static_fun` but not it
        # joined: then every call that may trace says whose static part it has.
        self.mixed = False
        # New keys made because a Python number changed, and whether that warned
        # (`_count_number_retrace`).
        self.number_retraces = 0
        self.warned = False

    def add(
        self, treedef: Any, static: tuple, names: tuple[str, str]
    ) -> tuple[Compiled, tuple | None]:
        """`(the jax.jit for a call structure not in jits, (treedef, static
        leaves) of the newest earlier key whose tree structure differs from this
        one's at most in numbers held by static fields)`; None for the second
        where there is none, or another thread added the key first.

        No lock: making a `jax.jit` traces nothing, and `setdefault` keeps the
        first of two threads' (a static leaf's `__eq__` may be user code, which
        must not run under a lock that a trace can need)."""
        made = self._compiled(treedef, static, names)
        compiled = self.jits.setdefault((treedef, static), made)
        if compiled is not made:
            return compiled, None
        shape = number_free(treedef)
        try:
            previous = self.latest.get(shape)
        except (TypeError, ValueError):  # node data JAX never hashes (a dict)
            shape = treedef
            previous = self.latest.get(shape)
        self.latest[shape] = (treedef, static)
        return compiled, previous

    def _compiled(
        self, treedef: Any, static: tuple, names: tuple[str, str]
    ) -> Compiled:
        traced = tuple(i for i, x in enumerate(static) if x is None)
        mixed = len(traced) != len(static)
        compiled = Compiled(traced if mixed else None, self.share, self.numbers)
        run = user_program(
            self.static_fun, treedef, static, traced if mixed else None, self.fun_at
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
        return compiled


# Layouts by function, then by static part and donation; other callables share one
# entry and are told apart by their static parts. Keyed weakly, but a layout's
# compiled programs refer to the function, so in practice an entry lives as long
# as the process, as equinox's cache of jits does.
_layouts: weakref.WeakKeyDictionary[Any, dict[Any, Layout]] = (
    weakref.WeakKeyDictionary()
)
# Only for finding a new wrapper's layout. Reentrant: a static part's __hash__
# or __eq__ (user code, run under it) may make another filter_jit wrapper.
_lock = threading.RLock()


def _any_callable() -> None:
    """The key for callables that are not plain functions (weakly referenceable)."""


# eqx.clear_caches() forgets equinox's shared jits: wrappers made later trace anew,
# existing ones keep theirs. Forgetting the layouts does the same here.
_eqx_private.register_cache_clear(_layouts.clear)


@functools.cache
def dispatch_problem() -> str | None:
    # Asked at the first wrapper, not at import: the probes trace a tiny program.
    # Where dispatch cannot stand on its own, every wrapper is equinox's, after
    # one warning: the same results and trace counts, equinox's per-call cost.
    problem = _eqx_private.dispatch_problem() or _jax_private.dispatch_problem()
    if problem is not None:
        warn_in_user_code(
            CompatibilityWarning(
                f"af.filter_jit runs as eqx.filter_jit on {versions()}: "
                f"{problem}. Results and traces are equinox's; nothing is shared, "
                "and retraces go unexplained unless an explain_retraces() block "
                "is open."
            )
        )
    return problem


@functools.cache
def can_share() -> bool:
    # Asked at the first wrapper that shares (the default), not at import: it
    # compiles a tiny program. A JAX that cannot is named once.
    problem = _jax_private.sharing_problem()
    # Before 0.5 JAX shows no traced program: documented, so not a surprise.
    if problem is not None and jax.__version_info__ >= (0, 5):
        warn_in_user_code(
            CompatibilityWarning(
                f"af.filter_jit shares no compiles on {versions()}: {problem}. "
                "Each trace compiles, as under eqx.filter_jit."
            )
        )
    return problem is None


@functools.cache
def can_share_numbers() -> bool:
    # Asked at the first wrapper that shares numbers; a JAX on which the probe
    # fails is named once, where a silent fallback would compile every field.
    unshared = numbers_unshared()
    if unshared is not None:
        warn_in_user_code(
            CompatibilityWarning(
                f"af.filter_jit(share_numbers=True) shares nothing on "
                f"{versions()}: {unshared}. "
                "Each program compiles alone, as without the option."
            )
        )
    return unshared is None


def layout_for(
    fun: Any, names: tuple[str, str], static_fun: Any, donate: tuple, share: tuple
) -> Layout:
    """The layout for a new wrapper of `fun`: equinox's `jax.jit` for it.
    `share`: `(share_compiles, share_numbers)`, as they apply."""
    owner = fun if type(fun) is types.FunctionType else _any_callable
    key = (names, static_fun, donate, share)
    with _lock:
        by_key = _layouts.setdefault(owner, {})
        layout = by_key.get(key)
        if layout is None:
            layout = by_key[key] = Layout(static_fun, *donate, *share)
        elif layout.static_fun is not static_fun:
            layout.mixed = True
    return layout


def numbers_unshared() -> str | None:
    """What keeps two programs that differ only in a number from sharing one on
    this JAX, or None where they share (the probe `af.filter_jit` runs before
    it first shares numbers: a JAX that writes its programs otherwise shows it
    here, not as a silent compile per field)."""

    def traced_with(number: float) -> Any:
        def run(x: Any) -> tuple[Any, None]:
            return x * number, None

        flat = _program.marked_program(run, always_wait=False)
        return jax.jit(flat).trace(np.float32(1))

    if _jax_private.NUMBERS_MOVED:
        return "moved: " + ", ".join(_jax_private.NUMBERS_MOVED)
    try:
        keys = []
        for number in (2.0, 3.0):
            closed, params = _jax_private.traced_program(traced_with(number))
            if not _jax_private.plain_jit_options(params):
                return (
                    "a plain jax.jit reads as one with shardings, layouts, "
                    "inlining or compiler options"
                )
            at = _numbers.sites(closed.jaxpr)
            if not at:
                return "the number a function multiplies by is not in its program"
            keys.append(_numbers.family_key(closed, at, params))
    except Exception as error:
        return f"reading a traced program raised {type(error).__name__}: {error}"
    if keys[0] != keys[1]:
        return "programs that differ only in a number have different shapes"
    return None
