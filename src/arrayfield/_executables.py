"""Which executable runs a traced program: the one this process compiled
before for the same program (`program_key`) and placement; with
`share_numbers`, from a family's second program on, the family's program
generalised over the numbers that differ (`_numbers`); else a compile of its
own. Each is compiled by one thread while
others that need it wait, and the tables are cleared with JAX's and equinox's
caches.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import weakref
from collections.abc import Callable
from typing import Any

import jax
import jax.extend
import jax.tree_util as jtu

from . import _eqx_private, _jax_private, _kept_families, _numbers, _tracing
from ._program_key import constant_keys, program_key


def with_output_tree(executable: Any, out_tree: Any, *call_args: Any) -> Any:
    """A program compiled for another trace, run with this trace's output tree
    (its static nodes hold what this trace returned)."""
    return out_tree.unflatten(jtu.tree_leaves(executable(*call_args)))


def with_numbers(
    executable: Any, numbers: tuple[Any, ...], out_tree: Any, *call_args: Any
) -> Any:
    """A generalised program (see `_numbers`) run with this trace's numbers."""
    return out_tree.unflatten(executable(*call_args, numbers))


class OtherSignature(Exception):
    """Raised where a generalised program would be traced for avals other than
    its own: a call that skipped `call_signature` (`Compiled.fast`) with
    arguments of another signature, which then takes the signature's way."""


class _Once:
    """A value one thread computes while others that need it wait: an XLA
    compile, which runs no user code and waits on nothing, so a thread waiting
    for another's compile can never close a cycle (no lock is held meanwhile)."""

    __slots__ = ("done", "failed", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.failed = False
        self.value: Any = None


def _computed_once(
    table: dict[Any, _Once], key: Any, compute: Callable[[], Any]
) -> tuple[Any, bool]:
    """`(table[key]'s value, whether this thread computed it)`: the first thread
    to need `key` runs `compute()`, the others wait for its result. If it
    raises, the waiters compute it themselves (and meet the error where it is
    one)."""
    cell = table.get(key)
    if cell is None:
        mine = _Once()
        cell = table.setdefault(key, mine)
        if cell is mine:
            try:
                mine.value = compute()
            except BaseException:
                mine.failed = True
                if table.get(key) is mine:
                    del table[key]
                raise
            finally:
                mine.done.set()
            return mine.value, True
    cell.done.wait()
    if cell.failed:
        return compute(), True
    return cell.value, False


class _Family:
    """Programs that differ only in the numbers they embed (`_numbers`): the
    family's number in this process (diagnostics name it), the numbers and
    constants of its first program (`first`, by bits: `_numbers.bits` and
    `value_key`), which compiled as its own, and the indices of the numbers its
    generalised program takes as inputs (`lifted`: those that differed from the
    first's in some later trace; it only grows)."""

    __slots__ = ("first", "kept_as", "lifted", "number")

    def __init__(self, number: int, first: tuple):
        self.number = number
        self.first = first
        self.lifted: frozenset[int] = frozenset()
        # `(folder, file name)` where the lifted numbers are kept for later
        # processes (`_kept_families`), or None: JAX's persistent cache is off.
        self.kept_as: tuple[Any, str] | None = None


class _Executables:
    """Every program compiled in this process with sharing on, by `program_key`,
    every family of programs seen, and the generalised program that runs a
    family (None where JAX would not generalise it), by the family's key;
    cleared with JAX's and equinox's caches. Threads read and add without a
    lock, except to number a new family (`family_for`)."""

    __slots__ = ("__weakref__", "by_key", "families", "general", "lock")

    def __init__(self) -> None:
        self.by_key: dict[tuple, _Once] = {}
        self.families: dict[tuple, _Family] = {}
        self.general: dict[tuple, _Once] = {}
        self.lock = threading.Lock()

    def family_for(self, key: tuple, first: tuple) -> tuple[_Family, bool]:
        """`(the family of this key, whether it is new)`, numbered in order; a
        new one notes `first` as its first program's numbers."""
        family = self.families.get(key)
        if family is not None:
            return family, False
        with self.lock:  # hashing a family key runs no user code
            family = self.families.get(key)
            if family is not None:
                return family, False
            family = self.families[key] = _Family(len(self.families) + 1, first)
            return family, True

    def widened(self, family: _Family, lifted: frozenset[int]) -> frozenset[int]:
        """The family's lifted numbers grown by `lifted` (threads widen it at
        once: the union of theirs)."""
        with self.lock:
            family.lifted |= lifted
            return family.lifted

    def cache_clear(self) -> None:
        self.by_key.clear()
        self.families.clear()
        self.general.clear()


class _SharingCompiled:
    """Every `Compiled` that shares executables, to clear when JAX clears its
    caches. Registered with JAX once: its registry is not locked, and a
    registration per structure would grow with every key a survey makes."""

    __slots__ = ("__weakref__", "lock", "members")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.members: weakref.WeakSet[Any] = weakref.WeakSet()

    def add(self, compiled: Any) -> None:
        with self.lock:
            self.members.add(compiled)

    def cache_clear(self) -> None:
        with self.lock:
            members = list(self.members)
        for compiled in members:
            compiled.cache_clear()


_executables = _Executables()
sharing = _SharingCompiled()
_jax_private.register_jax_cache(_executables)
_jax_private.register_jax_cache(sharing)
_eqx_private.register_cache_clear(_executables.cache_clear)


def executable_for(
    traced: Any, placement: tuple | None, call_args: tuple, share_numbers: bool
) -> tuple[Any, bool, tuple[Any, ...] | None]:
    """`(executable, compiled now for itself, numbers)` for a traced program whose
    committed arguments have these shardings (None: none committed): the one
    compiled for the same program and placement before; else, with
    `share_numbers`, where it is not its family's first, the family's
    generalised program (`_generalised_for`) and the numbers to call it with;
    else a new compile of its own."""
    # An executable also checks each call's pytree against the one it was
    # compiled for, so the same program called with other containers (a donating
    # layout that passes the first argument apart) is another executable.
    in_tree = _jax_private.traced_in_tree(traced)
    key = (program_key(traced), in_tree, placement)
    found = _executables.by_key.get(key)
    if found is not None and found.done.is_set() and not found.failed:
        return found.value, False, None
    general = None
    if share_numbers or _tracing.record.watched:  # explain_retraces reads families
        general = _generalised_for(traced, key, call_args, share_numbers)
    if general is not None:
        return general[0], False, general[1]
    # One compile per program, also when threads traced it at once.
    executable, own = _computed_once(
        _executables.by_key, key, lambda: traced.lower().compile()
    )
    return executable, own, None


def _generalised_for(
    traced: Any, key: tuple, call_args: tuple, share: bool
) -> tuple[Any, tuple[Any, ...]] | None:
    """`(generalised executable, this trace's numbers as its inputs)` for a
    program that embeds numbers or constants (`_numbers`), or None: it compiles
    a program of its own. A family's first program is its own (exact, as where
    nothing varies), unless an earlier process kept which numbers the family
    lifts (`_kept`); a later one differing from it only in numbers runs the
    family's program generalised over the numbers that differed so far (and the
    constants), compiled at the first trace that needs it, and again, wider,
    where a trace differs in a number it keeps as a literal. Without `share`
    only the family is noted, and a trace whose family was seen before is
    counted in `_tracing.record.number_families` (it would have shared)."""
    closed, params = _jax_private.traced_program(traced)
    if not _jax_private.plain_jit_options(params) or has_host_work(closed):
        return None
    if not _liftable_constants(closed.consts, call_args, params):
        return None
    try:
        at = _numbers.sites(closed.jaxpr)
        if not at and not closed.consts:
            return None
        found = _numbers.numbers(closed.jaxpr, at)
        # `key`: (program key, in_tree, placement), as `executable_for` made it.
        family_key = (_numbers.family_key(closed, at, params), *key[1:])
        seen = (_numbers.bits(found), constant_keys(key[0], closed))
    except Exception:  # a program this JAX writes otherwise: its own compile
        return None
    family, new = _executables.family_for(family_key, seen)
    if not share:
        if not new:
            _tracing.record.number_families += 1
        return None
    if new and not _kept(family, closed, at, params, key, len(seen[0])):
        # Its own program, compiled as any other.
        _tracing.record.family = (family.number, "first")
        _tracing.record.number_runs += 1
        return None
    first_numbers, first_consts = family.first
    differ = frozenset(
        i  # one family: the same sites, so as many numbers
        for i, (a, b) in enumerate(zip(first_numbers, seen[0], strict=True))
        if a != b
    )
    if not new and not differ and first_consts == seen[1]:
        return None  # the first program itself (placed otherwise, say)
    try:
        lifted = family.lifted
        if not differ <= lifted:
            _, covered = _numbers.selected(closed.jaxpr, at, differ)
            lifted = _executables.widened(family, covered)
        at, _ = _numbers.selected(closed.jaxpr, at, lifted)
        found = _numbers.numbers(closed.jaxpr, at)
        if _numbers.folded_otherwise(found, closed.consts):
            return None  # these values as literals: its own program
    except Exception:  # as above: its own compile
        return None
    inputs = (
        tuple(map(jax.device_put, _numbers.packed(found))),
        tuple(map(jax.device_put, closed.consts)),
    )
    executable, compiled = _computed_once(
        _executables.general,
        (family_key, lifted),
        lambda: _compile_general(closed, at, found, params, call_args, inputs),
    )
    if executable is None:  # JAX would not have it: a program of its own
        return None
    if compiled and family.kept_as is not None:
        _kept_families.keep(*family.kept_as, lifted)
    _tracing.record.family = (family.number, "generalised" if compiled else "joined")
    _tracing.record.number_runs += 1
    return executable, inputs


def _kept(
    family: _Family, closed: Any, at: tuple, params: dict, key: tuple, count: int
) -> bool:
    """For a family new to this process (of `count` numbers), where JAX's
    persistent cache is on: notes where its lifted numbers are to be kept, and
    whether an earlier process kept them (then they are the family's, and its
    first field shares at once: its program is the one that process compiled,
    read from JAX's cache)."""
    where = _kept_families.folder()
    if where is None:
        return False
    options = sorted((k, v) for k, v in params.items() if k != "jaxpr")
    try:
        name = _kept_families.name(_numbers.blanked(closed, at), (options, *key[1:]))
    except Exception:  # a program this JAX prints otherwise: nothing kept
        return False
    family.kept_as = (where, name)
    lifted = _kept_families.lifted(where, name)
    if not lifted or max(lifted) >= count:  # none kept, or not this family's
        return False
    _executables.widened(family, lifted)
    return True


def _liftable_constants(consts: Any, call_args: tuple, params: dict) -> bool:
    """Whether a program's captured arrays can become inputs of its generalised
    program without changing what a call does: none committed to a device (its
    placement would decide where the program runs, where as a constant it
    follows the arguments), and, where the program donates, none the same
    buffer as an argument (a donated buffer passed again is an error where
    `eqx.filter_jit` runs)."""
    arrays = [c for c in consts if isinstance(c, jax.Array)]
    if any(_jax_private.committed(c) for c in arrays):
        return False
    if not arrays or not any(params.get("donated_invars", ())):
        return True
    leaves = [x for x in jtu.tree_leaves(call_args) if isinstance(x, jax.Array)]
    ids = {id(x) for x in leaves}
    pointers = set()
    for x in leaves:
        with contextlib.suppress(Exception):  # sharded or deleted: no pointer
            pointers.add(x.unsafe_buffer_pointer())
    for c in arrays:
        if id(c) in ids:
            return False
        with contextlib.suppress(Exception):
            if c.unsafe_buffer_pointer() in pointers:
                return False
    return True


def _compile_general(
    closed: Any,
    at: tuple,
    found: tuple[_numbers.Number, ...],
    params: dict,
    call_args: tuple,
    inputs: tuple[Any, ...],
) -> Any:
    """A `jax.jit` of `closed` generalised at `at` (`_numbers.generalised`),
    called as `(*call_args, (packed numbers, constants))` and compiled now as the jit
    `params` describes compiled `closed` (name, donation, unused inputs); None
    where JAX does not accept the generalisation, or where it returns other
    avals (shape, dtype or weak type) than `closed`. A `jax.jit`, not its
    executable: calls then take JAX's C++ path, which finds this compile in its
    cache."""
    counts = [len(jtu.tree_leaves(arg)) for arg in call_args]
    donated = params["donated_invars"]
    bounds = list(itertools.accumulate(counts, initial=0))
    by_arg = [set(donated[a:b]) for a, b in itertools.pairwise(bounds)]
    if any(len(flags) > 1 for flags in by_arg):  # an argument donated in part
        return None
    where = _numbers.unpacking(found)
    try:
        run = jax.extend.core.jaxpr_as_fun(_numbers.generalised(closed, at))

        avals: list[tuple] = []  # those of its first trace, for which it compiles

        def program(*args: Any) -> list[Any]:
            traced = tuple(x.aval for x in jtu.tree_leaves(args))
            if not avals:
                avals.append(traced)
            elif traced != avals[0]:  # JAX traces it for another call: refused
                raise OtherSignature(
                    f"{params['name']}: a shared program was called with arguments "
                    "of another signature"
                )
            *call_args, (vectors, constants) = args
            numbers = _numbers.unpacked(vectors, where)
            return run(*constants, *jtu.tree_leaves(call_args), *numbers)

        program.__name__ = program.__qualname__ = params["name"]
        jitted = jax.jit(
            program,
            donate_argnums=tuple(i for i, flags in enumerate(by_arg) if True in flags),
            keep_unused=params["keep_unused"],
        )
        traced = jitted.trace(*call_args, inputs)
        if tuple(traced.jaxpr.out_avals) != tuple(closed.out_avals):
            return None
        traced.lower().compile()
    except Exception:  # any refusal means: do not generalise
        return None
    return jitted


_CLOSED_JAXPR = _jax_private.CLOSED_JAXPR
_JAXPR = _jax_private.JAXPR


def has_host_work(closed: Any) -> bool:
    """Whether a program has effects or calls back into Python (any depth)."""
    if closed.effects:
        return True
    pending = [closed.jaxpr]
    while pending:
        jaxpr = pending.pop()
        for eqn in jaxpr.eqns:
            if "callback" in eqn.primitive.name or eqn.effects:
                return True
            for value in eqn.params.values():
                values = value if isinstance(value, (tuple, list)) else (value,)
                for v in values:
                    if isinstance(v, _CLOSED_JAXPR):
                        pending.append(v.jaxpr)
                    elif isinstance(v, _JAXPR):
                        pending.append(v)
    return False
