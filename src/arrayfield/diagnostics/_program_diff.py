"""What made a compiled program new: the program a trace produced, compared with
one compiled before for the same function.

The arguments of a call say why it traced; what it compiled is decided by the
program, which also holds what no argument shows: arrays the function captured
(a closure or a global, embedded as constants) and Python numbers it read from
anywhere (embedded as literals). Both are read off the traced jaxpr
(`_program_key.masked_key`), so what this says is evidence, never a guess from
the Python objects: two programs whose masked keys are equal differ only in the
numbers listed, and each number names the line of the user's code that reads it.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Iterator
from typing import Any

import jax.tree_util as jtu
import numpy as np

from .. import _eqx_private, _jax_private
from .._errors import LIBRARY_DIRS, dtype_shorthand, short_repr
from .._program_key import masked_key, value_key
from ._paths import relative_path

# How many captured arrays of one kind a message names one by one.
_NAMED = 3


@dataclasses.dataclass(frozen=True)
class Number:
    """A number a program embeds: a literal, or a captured array (a constant)."""

    constant: bool
    key: Any  # equal for equal values (`_program_key.value_key`)
    text: str  # "14.0", or "f32[16,16]" for an array
    at: str  # "the `sub` at fit.py:16": the user's line that reads it
    name: str | None  # a constant's variable, as the function captured it
    how: str = ""  # how it captured it: "a variable step closes over", ...


@dataclasses.dataclass(frozen=True)
class Program:
    """One traced program, with the values it embeds apart from the rest."""

    masked: tuple  # the program's key with every number replaced by its aval
    numbers: tuple[Number, ...]
    equations: tuple  # the masked key of each top-level equation
    lines: tuple[str, ...]  # where each top-level equation comes from
    inputs: tuple  # the avals of the program's inputs
    # What each top-level equation gives: `f32[3,15,11]` (its outputs' avals).
    outputs: tuple[str, ...] = ()


def summarize(program: tuple[Any, dict[str, Any]], fn: Any) -> Program | None:
    """The `Program` of `(closed jaxpr, jit parameters)` traced from the Python
    function `fn` (unwrapped: its closure names the captured arrays); None
    where the jaxpr cannot be read (the explanation then leaves it out)."""
    closed, params = program
    try:
        masked, embedded = masked_key(closed, params)
        if not embedded and len(masked) == 1:  # unreadable
            return None
        jaxpr = closed.jaxpr
        readers = _first_readers(jaxpr)
        names = _captured_names(fn)
        numbers = []
        for e in embedded:
            key = value_key(e.value)
            if e.var is not None:  # a constant: named where the function holds it
                name, how = names(e.value) or (None, "")
                at = _reader_text(readers.get(e.var))
                numbers.append(Number(True, key, _aval_text(e.aval), at, name, how))
            else:
                at = _reader_text(e.eqn)
                numbers.append(Number(False, key, _literal_text(e.value), at, None))
        return Program(
            masked,
            tuple(numbers),
            masked[0][1][1],  # ("closed", (head, equations, ...), consts)
            tuple(_reader_text(eqn) for eqn in jaxpr.eqns),
            tuple(v.aval for v in jaxpr.invars),
            tuple(
                ", ".join(_aval_text(v.aval) for v in eqn.outvars) for eqn in jaxpr.eqns
            ),
        )
    except Exception:  # a JAX that writes programs otherwise: no explanation
        return None


def what_is_new(
    earlier: list[Program], new: Program, function: str
) -> Difference | None:
    """What makes `new` another program than the earlier one most like it (one
    that differs only in numbers, and in the fewest, else the latest with the
    same inputs); None where there is none, or where the two are one program."""
    same = [p for p in earlier if p.masked == new.masked]
    if same:
        old = min(reversed(same), key=lambda p: len(_differing(p, new)))
    else:
        old = next((p for p in reversed(earlier) if p.inputs == new.inputs), None)
    return None if old is None else _difference(old, new, function)


def _differing(old: Program, new: Program) -> list[tuple[Number, Number]]:
    return [
        (o, n) for o, n in zip(old.numbers, new.numbers, strict=True) if o.key != n.key
    ]


@dataclasses.dataclass(frozen=True)
class Difference:
    """What is new in a program: `kind` is "constants" (and maybe literals),
    "literals", "computation" or "inputs"; `lines` says it, with why and fix."""

    kind: str
    lines: tuple[str, ...]
    names: tuple[str, ...] = ()  # the captured variables that differ
    literals: tuple[tuple[str, str], ...] = ()  # (old, new) literals that differ


def _difference(old: Program, new: Program, function: str) -> Difference | None:
    """What makes `new` another program than `old`, or None where they are one."""
    if old.masked == new.masked:
        pairs = _differing(old, new)
        if not pairs:
            return None
        constants = [(o, n) for o, n in pairs if n.constant]
        literals = [(o, n) for o, n in pairs if not n.constant]
        lines: list[str] = []
        names: list[str] = []
        if constants:
            lines.extend(_constant_lines(constants, function, names))
        if literals:
            lines.extend(_literal_lines(literals))
        return Difference(
            "constants" if constants else "literals",
            tuple(lines),
            tuple(names),
            tuple((o.text, n.text) for o, n in literals),
        )
    if old.inputs != new.inputs:
        return Difference("inputs", ())
    both = zip(old.equations, new.equations, strict=False)
    at = next(
        (i for i, (o, n) in enumerate(both) if o != n),
        min(len(old.equations), len(new.equations)),
    )
    where = new.lines[at] if at < len(new.lines) else "its end"
    known = set(old.outputs)
    for line, gives in list(zip(new.lines, new.outputs, strict=False))[at:]:
        if gives not in known:  # one operation, another size: a clipped box
            return Difference(
                "computation",
                (
                    f"  its computation differs from {where} on: "
                    f"{'it' if line == where else line} gives {gives}, a shape "
                    "no operation of the closest program gives: "
                    "a slice or block of another size (a box clipped at an edge, "
                    "a window that shrank), which no number can stand for",
                    "    fix: expected where sizes differ; if a few sizes recur "
                    "often, pad to them (a clipped box kept at full size, its "
                    "outside masked out), as for shapes: one family per size",
                ),
            )
    return Difference(
        "computation",
        (
            f"  its computation differs from there on: from {where} (other "
            "operations, shapes or settings: the Python code took another path, "
            "or read another Python value that sets a shape or an option)",
        ),
    )


def _constant_lines(
    pairs: list[tuple[Number, Number]], function: str, names: list[str]
) -> list[str]:
    lines = []
    for _, n in pairs[:_NAMED]:
        what = f"array {n.text}"
        if n.name:
            names.append(n.name)
            what = f"{n.name} {n.text}, {n.how},"
        lines.append(
            f"  captured {what} read by {n.at}: other values than in the program "
            "compiled before"
        )
    if len(pairs) > _NAMED:
        lines.append(f"  ... and {len(pairs) - _NAMED} more captured arrays")
    passed = ", ".join(names) or "the captured arrays"
    lines.append(
        "    why: an array a jitted function closes over (or reads from a global) "
        "is not one of its arguments, so jit embeds it in the program as a "
        "constant: each new array is a new program and a new XLA compile."
    )
    lines.append(
        f"    fix: pass {passed} as an argument of {function} (one more argument, "
        "or a field of the Module you pass): arguments are traced, so every new "
        "value runs the one compiled program."
    )
    return lines


# How the literal lines' fix starts: `_record` drops it where the numbers that
# set the literals must stay numbers.
LITERAL_FIX = "    fix: hold a number that changes between calls as an array"


def _literal_lines(pairs: list[tuple[Number, Number]]) -> list[str]:
    shown = [f"{o.text} -> {n.text} ({n.at})" for o, n in pairs[:_NAMED]]
    more = f", and {len(pairs) - _NAMED} more" if len(pairs) > _NAMED else ""
    return [
        f"  numbers embedded in the program: {'; '.join(shown)}{more}",
        "    why: a Python number the trace computes with (a static field, a "
        "number argument, a captured or global variable, an int used in float "
        "arithmetic) is written into the program as a literal, so each new "
        "value is a new program.",
        f"{LITERAL_FIX} (an array "
        'field, e.g. Float[Array, ""] on an af.ArrayModule, or an array argument); '
        "keep it a Python number only where it sets a shape, a size or a loop "
        "count.",
    ]


# -- reading a program ---------------------------------------------------------------


def _first_readers(jaxpr: Any) -> dict[Any, Any]:
    """The first equation that reads each constant variable of `jaxpr`."""
    readers: dict[Any, Any] = {}
    constvars = {id(v): v for v in jaxpr.constvars}
    for eqn in jaxpr.eqns:
        for v in eqn.invars:  # variables, and literals (not hashable)
            if id(v) in constvars and constvars[id(v)] not in readers:
                readers[constvars[id(v)]] = eqn
    return readers


def user_line(eqn: Any) -> str | None:
    """`file:line` of the user's code that made a jaxpr equation, if JAX says."""
    for filename, line, _ in _jax_private.equation_frames(eqn):
        if not filename.startswith(LIBRARY_DIRS):
            return f"{relative_path(filename)}:{line}"
    return None


def _reader_text(eqn: Any) -> str:
    if eqn is None:
        return "no equation"
    where = user_line(eqn)
    name = f"`{eqn.primitive.name}`"
    return name if where is None else f"the {name} at {where}"


def _aval_text(aval: Any) -> str:
    """`f32[16,16]`: an aval's, or an array's, dtype and shape."""
    shape = ",".join(map(str, aval.shape))
    return f"{dtype_shorthand(aval.dtype)}[{shape}]"


def _literal_text(value: Any) -> str:
    try:
        return repr(np.asarray(value).item())
    except Exception:
        return short_repr(value)


# -- naming what a function captured -------------------------------------------------


def _captured_names(fn: Any) -> Any:
    """`name(array) -> (name, how) | None`: the variable through which `fn`
    captured an array (a closure cell or a global its code names; `` `name[path]` ``
    for a leaf inside a pytree) and how, matched by identity or, for NumPy arrays
    (which JAX copies into the program), by equal contents."""
    by_id: dict[int, tuple[str, str]] = {}
    numpy: list[tuple[np.ndarray, tuple[str, str]]] = []
    for label, how, leaf in _captured_leaves(fn):
        by_id.setdefault(id(leaf), (label, how))
        if isinstance(leaf, np.ndarray):
            numpy.append((leaf, (label, how)))

    def name_of(array: Any) -> tuple[str, str] | None:
        found = by_id.get(id(array))
        if found is not None:
            return found
        for candidate, label in numpy:
            if (
                candidate.shape == np.shape(array)
                and candidate.dtype == getattr(array, "dtype", None)
                and np.array_equal(candidate, array)
            ):
                return label
        return None

    return name_of


def captured_values(fn: Any) -> list[tuple[str, Any, str]]:
    """`(name, value, how)` of what the Python function `fn` closes over, and of
    the globals its code (nested functions included) names; modules, classes
    and functions left out. `how` says which, in words."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    name_of_fn = getattr(fn, "__name__", "the function")
    found: list[tuple[str, Any, str]] = []
    for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        found.append((name, value, f"a variable {name_of_fn} closes over"))
    namespace = getattr(fn, "__globals__", {})
    module = namespace.get("__name__", "its module")
    for name in dict.fromkeys(_names_read(code)):
        if name in namespace:
            found.append((name, namespace[name], f"a global of {module}"))
    return [
        (name, value, how)
        for name, value, how in found
        if not isinstance(value, (types.ModuleType, type, types.FunctionType))
    ]


def _names_read(code: types.CodeType) -> list[str]:
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.extend(_names_read(const))
    return names


def _captured_leaves(fn: Any) -> Iterator[tuple[str, str, Any]]:
    """`` (`name[path]`, how, leaf) `` for each array leaf of what `fn` captures
    (`captured_values`)."""
    for name, value, how in captured_values(fn):
        try:
            leaves = jtu.tree_flatten_with_path(value)[0]
        except Exception:  # a value whose flattening raises: not a pytree of ours
            continue
        for path, leaf in leaves:
            if _eqx_private.is_traced_leaf(leaf):
                yield f"`{name}{jtu.keystr(path)}`", how, leaf


def captured_arrays(fn: Any) -> list[str]:
    """`` `name` (f32[16,16]) `` for each array the Python function `fn` captures."""
    return [
        f"{label} ({_aval_text(leaf)})"
        for label, _, leaf in _captured_leaves(fn)
        if hasattr(leaf, "dtype")
    ]
