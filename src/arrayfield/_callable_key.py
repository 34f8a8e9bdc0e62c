"""When two calls trace to the same program although their callables differ.

`eqx.filter_jit` keys every non-array leaf by `==` and `hash`, which for functions,
`functools.partial`s and bound methods means identity: each scene built with its
own `functools.partial(step, ...)` or `lambda` compiles the step again, although
both trace to the same program. `SharedKey` compares what a trace can read of a
callable instead:

- a function: the same code object and globals dict, equal defaults, keyword
  defaults, attributes (`__dict__`) and closure cell contents;
- a `functools.partial`: an equal function, equal `args`, `keywords` and attributes;
- a bound method: an equal function and an equal `__self__`;
- a `jax.jit` wrapper: an equal function and the same options (an `eqx.filter_jit`
  or `af.filter_jit` wrapper is a pytree: its function sits in its static part).

A trace also reads the module globals its code names (`K` in `lambda x: x * K`,
in nested code objects too, and in the functions it reaches through them), at the
time it runs. Each key records those values when it is made, and two keys are
equal only if every such global is equal by the strict rule below, so a program
traced before `K` was rebound is never shared with a call made after. Builtins
that no global shadows are the same for everyone; a module, class or function
global compares by identity (a module attribute rebound later is not seen, as
`jax.jit` does not see it either). The same wrapper called again with the same
function keeps its trace, as under `eqx.filter_jit` and `jax.jit`.

"Equal" for a captured, bound or default value is strict: identical, or of the
same type and both hashable with `==` true (floats also by sign, so `0.0` and
`-0.0` differ); callables and tuples by these rules, recursively. Arrays, lists,
dicts and objects without value equality compare by identity. Every other leaf
keeps equinox's `==`, so nothing equinox would tell apart is merged.

`counterparts` pairs a shared call's objects with those of the call that traced
the program, so that outputs which pass an input through give back the caller's
own object rather than the tracing call's.
"""

from __future__ import annotations

import contextlib
import dis
import functools
import math
import operator
import types
from collections.abc import Callable
from typing import Any

import jax.tree_util as jtu
import numpy as np

from . import _internals

# Whether the callable keys work on this equinox and JAX; where they do not,
# `af.filter_jit` keys callables as equinox does (nothing is shared, nothing lost).
SUPPORTED: bool = _internals.can_share_callables()
_FUNCTION = types.FunctionType
_MODULE = types.ModuleType
_PARTIAL = functools.partial
_METHOD = types.MethodType
_JIT = _internals.JIT_FUNCTION
_TREEDEF = jtu.PyTreeDef
# Compared with `==` within one type: equal values behave the same in a trace.
_ATOMS = frozenset({int, bool, str, bytes, type(None), type(Ellipsis)})
# Numbers and strings: paired in outputs only where the two calls' differ in type
# or sign (1 and True, 0.0 and -0.0), which equinox's == lets share a key.
_NUMBERS_AND_TEXT = _ATOMS | {float, complex}
_MAX_DEPTH = 64  # deeper than any real closure; beyond it nothing is shared
# Functions whose globals one key records at most; past it the key shares nothing.
_MAX_FUNCTIONS = 4096

# A class whose instances are compared here by their own rule (af.filter_jit's
# wrapper parts): class -> (same(a, b, same_value), coarse hash, parts a trace of
# it can reach).
_rules: dict[
    type,
    tuple[Callable[..., bool], Callable[[Any], int], Callable[[Any], tuple]],
] = {}


def register(
    cls: type,
    same: Callable[[Any, Any, Callable[[Any, Any], bool]], bool],
    coarse_hash: Callable[[Any], int],
    parts: Callable[[Any], tuple],
) -> None:
    """Compare instances of `cls` with `same(a, b, same_value)`; `coarse_hash`
    must agree with it (equal instances, equal hashes); `parts(x)` are the objects
    (functions among them) that `same` compares."""
    _rules[cls] = (same, coarse_hash, parts)


def _is_callable_kind(cls: type) -> bool:
    return cls in (_FUNCTION, _PARTIAL, _METHOD, _JIT) or cls in _rules


class _Comparison:
    """One comparison: the pairs under way (a function whose closure refers to
    itself is equal to another if everything else is) and the depth."""

    __slots__ = ("active", "depth")

    def __init__(self) -> None:
        self.active: set[tuple[int, int]] = set()
        self.depth = 0

    def static(self, a: Any, b: Any) -> bool:
        """Equal as equinox's key compares a leaf or static field, except that
        callables follow the rules above."""
        if a is b:
            return True
        ta = type(a)
        if ta is not type(b):
            if _is_callable_kind(ta) or _is_callable_kind(type(b)):
                return False
            return _equal(a, b)
        if ta is tuple or ta is list:
            return len(a) == len(b) and all(map(self.static, a, b))
        if ta is _TREEDEF:
            return self.tree(a, b)
        if _is_callable_kind(ta):
            return self.nested(self._callable, a, b)
        return _equal(a, b)

    def value(self, a: Any, b: Any) -> bool:
        """Equal as a captured, bound or default value (the strict rule)."""
        if a is b:
            return True
        ta = type(a)
        if ta is not type(b):
            return False
        if ta in _ATOMS:
            return a == b
        if ta is float:
            return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
        if ta is complex:
            return self.value(a.real, b.real) and self.value(a.imag, b.imag)
        if ta is tuple:
            return len(a) == len(b) and self.nested(self._values, a, b)
        if ta is _TREEDEF:
            return self.tree(a, b)
        if _is_callable_kind(ta):
            return self.nested(self._callable, a, b)
        if isinstance(a, np.generic):  # by bytes: np.float32(-0.0) is not 0.0
            return a.dtype == b.dtype and a.tobytes() == b.tobytes()
        try:
            hash(a)
            hash(b)
        except Exception:  # arrays, lists, dicts, sets: identity only
            return False
        return _equal(a, b)

    def nested(self, compare: Callable[[Any, Any], bool], a: Any, b: Any) -> bool:
        pair = (id(a), id(b))
        if pair in self.active:
            return True  # already being compared further up: equal if all else is
        if self.depth >= _MAX_DEPTH:
            return False
        self.active.add(pair)
        self.depth += 1
        try:
            return compare(a, b)
        finally:
            self.depth -= 1
            self.active.discard(pair)

    def _values(self, a: Any, b: Any) -> bool:
        return all(map(self.value, a, b))

    def _mapping(self, a: dict | None, b: dict | None) -> bool:
        if not a or not b:
            return not a and not b
        return a.keys() == b.keys() and all(self.value(a[k], b[k]) for k in a)

    def _callable(self, a: Any, b: Any) -> bool:
        ta = type(a)
        if ta is _FUNCTION:
            return (
                a.__code__ is b.__code__
                and a.__globals__ is b.__globals__
                and a.__name__ == b.__name__
                and a.__qualname__ == b.__qualname__
                and self.value(a.__defaults__, b.__defaults__)
                and self._mapping(a.__kwdefaults__, b.__kwdefaults__)
                and self._mapping(a.__dict__, b.__dict__)
                and self._cells(a.__closure__, b.__closure__)
            )
        if ta is _PARTIAL:
            return (
                self.value(a.func, b.func)
                and self.value(a.args, b.args)
                and self._mapping(a.keywords, b.keywords)
                and self._mapping(a.__dict__, b.__dict__)
            )
        if ta is _METHOD:
            return self.value(a.__func__, b.__func__) and self.value(
                a.__self__, b.__self__
            )
        if ta is _JIT:
            parts_a, parts_b = _internals.jit_parts(a), _internals.jit_parts(b)
            if parts_a is None or parts_b is None:
                return False
            return self.value(parts_a[0], parts_b[0]) and _equal(parts_a[1], parts_b[1])
        return _rules[ta][0](a, b, self.value)

    def reads(self, a: Globals | None, b: Globals | None) -> bool:
        """Whether two keys' recorded globals are equal (by the strict rule)."""
        if a is None or b is None:
            return False  # too many functions to record: shared with nothing
        return a.keys() == b.keys() and all(self.value(a[k], b[k]) for k in a)

    def _cells(self, a: tuple | None, b: tuple | None) -> bool:
        if a is None or b is None:
            return a is b
        if len(a) != len(b):
            return False
        for cell_a, cell_b in zip(a, b, strict=True):
            try:
                contents_a = cell_a.cell_contents
            except ValueError:  # an empty cell (a name not yet bound)
                contents_a = _EMPTY
            try:
                contents_b = cell_b.cell_contents
            except ValueError:
                contents_b = _EMPTY
            if not self.value(contents_a, contents_b):
                return False
        return True

    def tree(self, a: Any, b: Any) -> bool:
        """Same node types and arities, static parts equal by `static`."""
        if _equal(a, b):
            return True
        if a.num_nodes != b.num_nodes or a.num_leaves != b.num_leaves:
            return False
        node_a, node_b = a.node_data(), b.node_data()
        if node_a is None or node_b is None:
            return node_a is node_b
        if node_a[0] is not node_b[0] or not self.static(node_a[1], node_b[1]):
            return False
        return all(map(self.tree, a.children(), b.children()))


_EMPTY = object()  # the contents of an empty closure cell


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an array's ==, or one that raises: not equal
        return False


def same_static(a: Any, b: Any) -> bool:
    """Whether `af.filter_jit` keys two leaves (or static fields) alike, as they
    are now (their globals are read now for both)."""
    return _Comparison().static(a, b)


def same_value(a: Any, b: Any) -> bool:
    """Equal as a captured, bound or default value (the strict rule)."""
    return _Comparison().value(a, b)


def is_compared_by_trace(x: Any) -> bool:
    """Whether callables of `x`'s type are compared by what they trace to."""
    return _is_callable_kind(type(x))


def coarse_hash(x: Any) -> int:
    """A hash that equal things (by `SharedKey`'s rules) share."""
    t = type(x)
    if t is _FUNCTION:
        return id(x.__code__)
    if t is _PARTIAL:
        return coarse_hash(x.func) ^ len(x.args)
    if t is _METHOD:
        return coarse_hash(x.__func__)
    if t is _JIT:
        parts = _internals.jit_parts(x)
        return 0 if parts is None else coarse_hash(parts[0])
    rule = _rules.get(t)
    if rule is not None:
        return rule[1](x)
    if t is tuple or t is list:
        return hash(tuple(map(coarse_hash, x)))
    try:
        return hash(x)  # a PyTreeDef's hash leaves out its static parts
    except Exception:
        return 0


# -- the module globals a trace reads -------------------------------------------------

# (id of a globals dict, name) -> the value bound to that name when a key was made.
Globals = dict[tuple[int, str], Any]
_READS_GLOBAL = frozenset({"LOAD_GLOBAL", "LOAD_NAME", "LOAD_FROM_DICT_OR_GLOBALS"})
# Per code object: the names it and the code nested in it read as globals, and
# all the names they read (attributes too: Python keeps both in `co_names`).
_names_of: dict[types.CodeType, tuple[tuple[str, ...], frozenset[str]]] = {}


def _names(code: types.CodeType) -> tuple[tuple[str, ...], frozenset[str]]:
    names = _names_of.get(code)
    if names is None:
        read_as_global = {
            op.argval
            for op in dis.get_instructions(code)
            if op.opname in _READS_GLOBAL and isinstance(op.argval, str)
        }
        read = set(code.co_names)
        for const in code.co_consts:
            if type(const) is types.CodeType:
                nested_globals, nested = _names(const)
                read_as_global.update(nested_globals)
                read.update(nested)
        names = _names_of[code] = (tuple(sorted(read_as_global)), frozenset(read))
    return names


def global_names(code: types.CodeType) -> tuple[str, ...]:
    """The names `code` and the code objects nested in it can read as globals
    (computed once per code object)."""
    return _names(code)[0]


def attribute_names(code: types.CodeType) -> frozenset[str]:
    """The names `code` and the code objects nested in it read as attributes
    (or globals), computed once per code object."""
    return _names(code)[1]


def globals_read(roots: tuple) -> Globals | None:
    """The globals that the functions reachable from `roots` (leaves, static
    fields, treedefs) read, with their values now; None past _MAX_FUNCTIONS."""
    found: Globals = {}
    seen: set[int] = set()
    pending = list(roots)
    functions = 0
    while pending:
        x = pending.pop()
        t = type(x)
        if t is tuple or t is list:
            pending.extend(x)
            continue
        if t is _TREEDEF:
            node = x.node_data()
            if node is not None:
                pending.append(node[1])
                pending.extend(x.children())
            continue
        if not _is_callable_kind(t) or id(x) in seen:
            continue
        seen.add(id(x))
        if t is _FUNCTION:
            functions += 1
            if functions > _MAX_FUNCTIONS:
                return None
            scope = x.__globals__
            for name in global_names(x.__code__):
                if name in scope:
                    value = found[id(scope), name] = scope[name]
                    if type(value) is _MODULE:
                        # `cfg.GAIN` reads a module's attribute as it traces;
                        # the functions a module holds are not followed.
                        namespace = vars(value)
                        for attr in attribute_names(x.__code__) & namespace.keys():
                            found[id(namespace), attr] = namespace[attr]
                    else:
                        pending.append(value)  # a function it calls reads globals
            pending.extend(x.__defaults__ or ())
            pending.extend((x.__kwdefaults__ or {}).values())
            pending.extend(x.__dict__.values())
            for cell in x.__closure__ or ():
                with contextlib.suppress(ValueError):  # an empty cell
                    pending.append(cell.cell_contents)
        elif t is _PARTIAL:
            pending.append(x.func)
            pending.extend(x.args)
            pending.extend(x.keywords.values())
            pending.extend(x.__dict__.values())
        elif t is _METHOD:
            pending.append(x.__func__)
            pending.append(x.__self__)
        elif t is _JIT:
            parts = _internals.jit_parts(x)
            if parts is not None:
                pending.append(parts[0])
        else:
            pending.extend(_rules[t][2](x))
    return found


def same_reads(a: Globals | None, b: Globals | None) -> bool:
    """Whether two records of `globals_read` hold equal values (by the strict
    rule)."""
    return _Comparison().reads(a, b)


class SharedKey:
    """A call's `(treedef, static leaves)`, equal to another call's when both trace
    to the same program (the rules in this module's docstring).

    `context` is what else the trace runs (the jitted function's static part):
    only the globals it reads are recorded, as part of this key."""

    __slots__ = ("hash", "reads", "static", "treedef")

    def __init__(self, treedef: Any, static: tuple, context: Any = ()):
        self.treedef = treedef
        self.static = static
        self.hash = hash((hash(treedef), tuple(map(coarse_hash, static))))
        self.reads = globals_read((treedef, static, context))

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        if type(other) is not SharedKey:
            return NotImplemented
        if self.hash != other.hash or len(self.static) != len(other.static):
            return False
        compare = _Comparison()
        return (
            compare.tree(self.treedef, other.treedef)
            and all(map(compare.static, self.static, other.static))
            and compare.reads(self.reads, other.reads)
        )

    def reads_as_now(self, context: Any = ()) -> bool:
        """Whether the globals this key recorded still hold the same values."""
        now = globals_read((self.treedef, self.static, context))
        return same_reads(self.reads, now)


# -- outputs: the caller's objects where the trace passed an input through ----------

Counterparts = dict[int, tuple[Any, Any]]  # id(traced call's object) -> (it, caller's)


def counterparts(traced: SharedKey, caller: SharedKey) -> Counterparts:
    """The traced call's static objects paired with the caller's at the same places
    (leaves and static fields), where they are not the same object."""
    found: Counterparts = {}

    def pair(a: Any, b: Any) -> None:
        if a is b:
            return
        if type(a) is type(b) and (type(a) is tuple or type(a) is list):
            for x, y in zip(a, b, strict=False):
                pair(x, y)
        elif type(a) is _TREEDEF and type(b) is _TREEDEF:
            pair_trees(a, b)
        elif type(a) not in _NUMBERS_AND_TEXT or not _Comparison().value(a, b):
            found[id(a)] = (a, b)  # (an equal number or string of the same type is
            # the same to any reader, and may be an interned object found anywhere)

    def pair_trees(a: Any, b: Any) -> None:
        node_a, node_b = a.node_data(), b.node_data()
        if node_a is None or node_b is None:
            return
        pair(node_a[1], node_b[1])
        for x, y in zip(a.children(), b.children(), strict=False):
            pair_trees(x, y)

    for a, b in zip(traced.static, caller.static, strict=True):
        if a is not None:
            pair(a, b)
    pair_trees(traced.treedef, caller.treedef)
    return found


def swap(x: Any, pairs: Counterparts) -> Any:
    """`x` with every traced-call object found in `pairs` (also in tuples, lists and
    treedefs) replaced by the caller's."""
    t = type(x)
    if t is tuple or t is list:
        swapped = [swap(y, pairs) for y in x]
        if all(map(operator.is_, swapped, x)):
            return x
        return t(swapped)
    if t is _TREEDEF:
        return _swap_tree(x, pairs)
    found = pairs.get(id(x))
    return found[1] if found is not None and found[0] is x else x


def _swap_tree(treedef: Any, pairs: Counterparts) -> Any:
    node = treedef.node_data()
    if node is None:
        return treedef
    kind, aux = node
    new_aux = swap(aux, pairs)
    children = treedef.children()  # pyright: ignore[reportAttributeAccessIssue]
    new_children = [_swap_tree(c, pairs) for c in children]
    if new_aux is aux and all(map(operator.is_, new_children, children)):
        return treedef
    return _TREEDEF.from_node_data_and_children(  # pyright: ignore[reportAttributeAccessIssue]
        jtu.default_registry, (kind, new_aux), new_children
    )
