"""`audit` and `assert_clean`: find recompile hazards in a live pytree, before a jit.

One tree: the leaves that could compile a jitted step again, leaving out what is
the same in every instance (module-level functions, declared defaults). Two trees
built the same way: exactly the leaves that would compile it again for the second
after the first, under `eqx.filter_jit` and under `af.filter_jit`, found with the
comparison `explain_retraces` makes (`_diff.py`).

Reads the trees, never changes them. Paths are written as `explain_retraces`
writes them (`_paths.py`), so a finding and a retrace warning about the same leaf
match.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

import jax
import jax.tree_util as jtu
import numpy as np

from .._eqx_private import FUNCTION_FIELD, is_filter_jit, jit_wrapper_classes
from .._errors import AuditError, format_annotation
from .._facts import PYTHON_NUMBERS, is_module
from .._spec import Unresolved, field_spec
from ._annotations import field_annotation
from ._diff import cause_text, diff, group
from ._findings import AF, EQX, KINDS, Finding, Findings, Jit, check_jit
from ._hints import (
    FILTER_JIT,
    WEAK_FIX,
    article,
    bypassed_init,
    kept_number_fix,
    normalize_fix,
    number_fix,
    opted_out,
)
from ._paths import (
    FieldRef,
    Leaf,
    StaticField,
    function_name,
    is_array,
    path_to_str,
    walk,
)
from ._programs import leaves_the_program_reads, numbers_only
from ._signature import leaf_text, signature
from ._trial import in_call


def _shared_objects() -> set[int]:
    """The ids of the objects every module holds at its top level, also inside
    tuples there (an optimizer built at module level is a NamedTuple of
    closures): the same objects on every call, however often a step is called.
    Read once per audit."""
    ids: set[int] = set()
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict):
            _collect(list(namespace.values()), ids, depth=2)
    return ids


def _collect(values: list[Any], ids: set[int], depth: int) -> None:
    for value in values:
        ids.add(id(value))
        # Tuples only: a list or dict at module level may gain a new closure on
        # every call, which must stay reported.
        if depth and isinstance(value, tuple):
            _collect(list(value), ids, depth - 1)


class _Constants:
    """What is the same in every instance: module-level objects, and the declared
    defaults of a Module's fields and `__init__` parameters."""

    def __init__(self) -> None:
        self._init_defaults: dict[tuple[type, str], Any] = {}

    @functools.cached_property
    def _module_level(self) -> set[int]:
        return _shared_objects()

    def module_level(self, x: Any) -> bool:
        return id(x) in self._module_level

    def declared_default(self, x: Any, field: FieldRef | None) -> bool:
        """Whether `x` is its field's class default, or the default of the
        `__init__` parameter of the same name (identical, or equal and of the
        same type for strings and numbers)."""
        if field is None:
            return False
        for default in (field.field.default, self._init_default(field)):
            if default is x:
                return True
            same_type = type(x) in _CONSTANT_TYPES and type(default) is type(x)
            if same_type and default == x:
                return True
        return False

    def _init_default(self, field: FieldRef) -> Any:
        key = (field.owner, field.name)
        if key not in self._init_defaults:
            try:
                parameters = inspect.signature(field.owner.__init__).parameters
            except (TypeError, ValueError):
                parameters = {}
            parameter = parameters.get(field.name)
            default = dataclasses.MISSING if parameter is None else parameter.default
            self._init_defaults[key] = default
        return self._init_defaults[key]


# Values compared by `==` that a class may declare as a default.
_CONSTANT_TYPES = (*PYTHON_NUMBERS, str, bytes)


def _shared_callable(x: Any, field: FieldRef | None, constants: _Constants) -> bool:
    """Whether a callable leaf is the same object in every instance: a function
    or other callable named at the top level of a module (a module-level lambda
    too, or one held in a module-level tuple such as an optimizer), a class, the
    field's declared default, or a method bound to such an object."""
    if isinstance(x, type):
        return "<locals>" not in x.__qualname__
    if isinstance(x, types.MethodType):
        owner = x.__self__
        return isinstance(owner, type) or constants.module_level(owner)
    if _named_at_module_level(x):
        return True  # a def at module level or in a class body
    if isinstance(x, types.BuiltinFunctionType):
        owner = x.__self__
        if owner is None or isinstance(owner, types.ModuleType | type):
            return True
        return constants.module_level(owner)
    return constants.module_level(x) or constants.declared_default(x, field)


def _named_at_module_level(x: Any) -> bool:
    """Whether `x` is what its `__module__` and `__qualname__` name: a def at
    module level or in a class body, not a copy made per call with that name
    (a `functools.wraps` wrapper). Reads namespaces, so no lazy import runs."""
    module = sys.modules.get(getattr(x, "__module__", None) or "")
    qualname = getattr(x, "__qualname__", None)
    if module is None or not isinstance(qualname, str) or "<" in qualname:
        return False
    target: Any = module
    for part in qualname.split("."):
        namespace = getattr(target, "__dict__", None)
        if not isinstance(namespace, dict | types.MappingProxyType):
            return False
        target = namespace.get(part)
        if isinstance(target, staticmethod):
            target = target.__func__
    return target is x


def _callable_hint(x: Any) -> str:
    if isinstance(x, types.MethodType):
        owner = type(x.__self__).__qualname__
        return (
            f"a method bound to {article(owner)} {owner} is hashed by its object, "
            f"so a method of a new {owner} compiles again: bind it to one object, or "
            "keep it out of the jitted arguments"
        )
    qualname = getattr(x, "__qualname__", "")
    if _is_jax_jit(x):
        return (
            "a jax.jit wrapper is hashed by identity, so one made per instance (as "
            "self.forward = jax.jit(fn) in __init__) compiles the jitted function "
            "that takes it again for every instance: jit fn once at module level, "
            "or keep the wrapper out of the jitted arguments"
        )
    if isinstance(x, types.FunctionType) and "<locals>" in qualname:
        maker = qualname.split(".<locals>", 1)[0]
        return (
            f"a closure made by each call of {maker} is hashed by identity, so "
            f"every call of {maker} that makes a new one compiles again: call it "
            "once and reuse the result (at module level, or in a functools.cache'd "
            "factory), or keep it out of the jitted arguments"
        )
    return (
        "a fresh closure, lambda or functools.partial per call is a new cache "
        "key: create it once, or make it an eqx.Module / eqx.Partial"
    )


def _is_jax_jit(x: Any) -> bool:
    return hasattr(x, "lower") and hasattr(x, "__wrapped__") and not is_module(x)


def _leaf_finding(leaf: Leaf, constants: _Constants) -> Finding | None:
    path, value, field, within = leaf.path, leaf.value, leaf.field, leaf.within
    if type(value) in PYTHON_NUMBERS:
        if constants.declared_default(value, field) and not _array_field(field):
            return None
        if type(value) is int and opted_out(field or within):
            return None  # a shape or index kept a Python int, as AF002 advises
        hint = number_fix(field, value, within, shape=leaf.within_shape)
        return Finding(path, value, "python-scalar", hint)
    if isinstance(value, np.generic):
        if bypassed_init(field):
            hint = normalize_fix(field)  # type: ignore[arg-type]
        else:
            hint = (
                "store a JAX array, jnp.asarray(x, dtype=...), or subclass "
                "af.ArrayModule, which converts it"
            )
        return Finding(path, value, "numpy-scalar", hint)
    if isinstance(value, jax.Array):
        if getattr(value, "weak_type", False):
            return Finding(path, value, "weak-type", WEAK_FIX)
        return None
    if is_array(value):
        return None
    if callable(value):
        if _shared_callable(value, field, constants):
            return None
        hint = _callable_hint(value)
    elif type(value) in _CONSTANT_TYPES and constants.declared_default(value, field):
        return None
    elif type(value).__eq__ is object.__eq__:
        name = type(value).__qualname__
        hint = (
            f"{article(name)} {name} compares by identity (it defines no __eq__), "
            f"so every new {name} is a new cache key: give {name} value equality "
            "(__eq__ and __hash__), or keep it out of the jitted arguments"
        )
    else:
        kind = type(value).__name__
        hint = (
            f"{article(kind)} {kind} is hashed into the cache key: mark it "
            "eqx.field(static=True) if it is a fixed setting, or keep it out of "
            "the jitted arguments if it changes"
        )
    declared = "" if field is None else field.declared
    return Finding(path, value, "hashed-leaf", hint + declared)


def _array_field(field: FieldRef | None) -> bool:
    """Whether the field's annotation asks for an array (a number there is the
    hazard arrayfield exists for, default or not); not for a field opted out
    with `af.field(convert=False)`, which asks for a Python value."""
    if field is None or opted_out(field):
        return False
    try:
        resolved = field_annotation(field)
    except Unresolved:
        return True  # unknown: keep reporting
    return field_spec(resolved) is not None


def audit(
    tree: Any,
    other: Any = None,
    *,
    name: str = "tree",
    fn: Callable[[Any], Any] | None = None,
) -> Findings:
    """Find what would make a jitted function compile again, before you jit.

    **One tree**, `af.audit(tree)`: every leaf that could make `eqx.filter_jit`
    compile again, or reuse a trace made for another type. Works on any pytree:
    `eqx.Module`s, `af.ArrayModule`s, optax states, dicts, lists, nested in each
    other. What is the same in every instance is left out: functions and other
    callables named at the top level of a module (module-level lambdas too, such
    as the default activations of `eqx.nn.MLP`, and closures held by a
    module-level object, such as an optimizer built at import), classes, and
    numbers and strings equal to the default their field declares (in the class
    body or in `__init__`), unless the field's annotation asks for an array. Ints
    in an `af.field(convert=False)` field are left out too: that is how the
    codemod (AF002) keeps a shape, size or index a Python value. One snapshot
    cannot tell a value that changes from a constant (a counter `step: int = 0`
    still at 0 is not reported): compare two trees for that.

    **Two trees**, `af.audit(tree, other)`: exactly the leaves that would make a
    jitted function compile again when called with `other` after `tree`, for
    trees built the same way (two fields' scenes, two runs' states). Leaves equal
    in both are never reported. Every such difference makes `eqx.filter_jit` and
    `af.filter_jit` trace again. `eqx.filter_jit` also compiles again for each;
    `af.filter_jit` compiles again only where the new trace is a different
    program: certainly for a new shape, dtype or structure, and for any other
    leaf only if the trace reads it into the program (a helper compared by
    identity that the step reads the same way costs a trace, not a compile).
    `recompiles` names the jits certain to compile again; `af.explain_retraces`
    says, call by call, whether a trace compiled.

    **Two trees and the function**, `af.audit(tree, other, fn=step)`: the same
    findings, with `recompiles` exact for `af.filter_jit`. `step` is traced on
    both trees (arrays traced, every other leaf static, as `af.filter_jit`
    traces a new cache key) and the two programs compared by its rule; where they
    differ, each differing leaf is tried alone, so `af.filter_jit` is named only
    for the leaves the program depends on. This runs `step`'s Python, as a jit
    would when it traces; `step` takes the tree as its one argument (wrap it:
    `fn=lambda scene: step(scene, data)`).

    **Arguments:**

    - `tree`: the pytree to inspect (typically the model or the whole training
        state you pass to a jitted step).
    - `other`: a second tree built the same way, to compare `tree` with; omit it
        for a one-tree audit.
    - `name`: how paths start, e.g. `name="scene"` gives `scene.sources[1].size`.
    - `fn`: with two trees, the function to trace on both, for an exact answer
        about `af.filter_jit`'s compiles.

    **Returns:**

    `af.Findings`, a list of `af.Finding` (`.path`, `.value`, `.kind`, `.hint`,
    `.field`, and for two trees `.other`, `.why`, `.recompiles`).
    `print(af.audit(tree))` shows a report, one line a finding, grouped by kind:

    - `python-scalar`: a Python `bool`/`int`/`float`/`complex` leaf. The hint says
        whether its field is annotated as an array (subclass `af.ArrayModule`,
        or `af.normalize` a tree built without `__init__`) or as a number
        (re-annotate it, or make it `static=True`).
    - `numpy-scalar`: a NumPy scalar leaf.
    - `hashed-leaf`: a string, closure, lambda, `functools.partial` or other
        object.
    - `weak-type`: a weakly typed JAX array.
    - `static-array`: an array inside a `static=True` field.

    A two-tree report prints one line per cause: the path (with `[*]` for the
    list indices its leaves span), the field and the line declaring it, the old
    and new value, and the fix.

    !!! example

        ```python
        import functools

        import equinox as eqx
        import jax.numpy as jnp
        import arrayfield as af

        class Params(eqx.Module):
            w: jnp.ndarray
            lr: float

        findings = af.audit(Params(w=jnp.ones(3), lr=0.1), name="params")
        assert [(f.path, f.kind) for f in findings] == [("params.lr", "python-scalar")]

        def relative_step(x, factor):
            return factor * x

        class Source(eqx.Module):
            flux: jnp.ndarray
            step: object
            name: str

        def build(field):
            step = functools.partial(relative_step, factor=0.1)
            return Source(jnp.ones(3), step, f"source-{field}")

        first, second = af.audit(build(0), build(1), name="source")
        assert (first.path, first.recompiles) == ("source.step", ("eqx.filter_jit",))
        assert (second.value, second.other) == ("source-0", "source-1")
        assert second.recompiles == ("eqx.filter_jit",)  # af: if read by the trace
        ```
    """
    if other is not None:
        findings = _compare(tree, other, name)
        return findings if fn is None else _by_program(findings, fn, tree, other)
    leaves, statics = walk(tree, name)
    constants = _Constants()
    findings = []
    wrappers = jit_wrapper_classes()
    for leaf in leaves:
        if leaf.field is not None and leaf.field.owner in wrappers:
            continue  # the function's name; its function is checked below
        finding = _leaf_finding(leaf, constants)
        if finding is not None:
            holder = leaf.field or leaf.within
            if holder is not None:
                finding = dataclasses.replace(finding, field=holder.location)
            findings.append(finding)
    for static in statics:
        if static.field.owner in wrappers:
            finding = _jit_wrapper_finding(static, constants)
            if finding is not None:
                findings.append(finding)
        elif any(is_array(x) for x in jtu.tree_leaves(static.value)):
            findings.append(
                Finding(
                    static.path,
                    static.value,
                    "static-array",
                    f"{static.field.where} is static=True but holds an array "
                    f"(annotated {format_annotation(static.field.annotation)}): "
                    f"drop static=True so it is traced{static.field.declared}",
                    static.field.location,
                )
            )
    findings.sort(key=lambda f: list(KINDS).index(f.kind))
    return Findings(findings, name)


def _jit_wrapper_finding(static: StaticField, constants: _Constants) -> Finding | None:
    """An `eqx.filter_jit` wrapper in the tree is keyed by its function: one made
    anew around a closure (`self.forward = eqx.filter_jit(fn)` in `__init__`) is
    a new cache key for the jitted function that takes the tree."""
    if static.field.name != FUNCTION_FIELD:
        return None
    function_leaves, _ = static.value
    fresh = [
        x
        for x in function_leaves
        if callable(x) and not _shared_callable(x, None, constants)
    ]
    if not fresh:
        return None
    path = static.path.removesuffix(f".{FUNCTION_FIELD}")  # the wrapper's own path
    return Finding(
        path,
        fresh[0],
        "hashed-leaf",
        "a filter_jit wrapper (eqx or af) around a closure made per instance (as "
        "self.forward = eqx.filter_jit(fn) in __init__) is keyed by that closure, "
        "so a jitted function that takes this tree compiles again for every "
        "instance: jit the function once at module level, or jit only the outer "
        "step",
    )


def _values(tree: Any, name: str) -> dict[str, Any]:
    leaves, statics = walk(tree, name)
    values = {leaf.path: leaf.value for leaf in leaves}
    values.update((static.path, static.value) for static in statics)
    return values


class _Jitted:
    """A jit wrapper seen as one leaf: the function it wraps is what a cache
    key compares (its parts are the wrapper's internals, not the user's)."""

    __slots__ = ("wrapper",)

    def __init__(self, wrapper: Any):
        self.wrapper = wrapper

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.wrapper(*args, **kwargs)

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is _Jitted
            and type(other.wrapper) is type(self.wrapper)
            and other.wrapper.__wrapped__ is self.wrapper.__wrapped__
        )

    def __hash__(self) -> int:
        return id(self.wrapper.__wrapped__)

    def __repr__(self) -> str:
        kind = "af" if type(self.wrapper).__module__.startswith("arrayfield") else "eqx"
        return f"{kind}.filter_jit({leaf_text(self.wrapper.__wrapped__)})"


def _opaque_jits(tree: Any) -> Any:
    return jtu.tree_map(
        lambda x: _Jitted(x) if is_filter_jit(x) else x, tree, is_leaf=is_filter_jit
    )


def _compare(tree: Any, other: Any, name: str) -> Findings:
    """The leaves of `other` that compile a jitted function again after `tree`."""
    tree, other = _opaque_jits(tree), _opaque_jits(other)
    before = signature({name: tree}, (tree,), {}, traced_scalars=False)
    after = signature({name: other}, (other,), {}, traced_scalars=False)
    changes = diff(before, after, FILTER_JIT)
    old_values, new_values = _values(tree, name), _values(other, name)
    findings: list[Finding] = []
    causes: dict[int, tuple[int, str]] = {}
    for number, changed in enumerate(group(changes)):
        line = cause_text(changed)
        for c in changed:
            if c.path == name and name not in old_values:  # the whole tree's
                old, new = tree, other
            else:
                old, new = old_values.get(c.path), new_values.get(c.path)
            location = "" if c.field is None else c.field.location
            # A new shape, dtype or structure is a new program under any jit; any
            # other difference af.filter_jit traces again, and compiles only if
            # the trace reads it into a different program, which only the trace
            # can tell.
            jits = (EQX, AF) if c.cause == "structure" else (EQX,)
            finding = Finding(c.path, old, c.cause, c.fix, location, new, c.why, jits)
            causes[id(finding)] = (number, line)
            findings.append(finding)
    # Stable: a cause's findings stay together.
    findings.sort(key=lambda f: list(KINDS).index(f.kind))
    return Findings(findings, name, causes, two_trees=True)


_NUMBERS_HINT = (
    "numbers differ: shared with af.filter_jit(share_numbers=True). The two "
    "programs differ only in the numbers they embed (literals, where slices "
    "start and blocks are placed), so that option runs one program, which takes "
    "them as inputs, for both; nothing needs rewriting (results may differ from "
    "eqx.filter_jit's in the last bits)"
)

_NUMBERS_CAUSE = (
    "numbers differ: shared with af.filter_jit(share_numbers=True), nothing to rewrite"
)

# After the hint for a leaf that is no static field (the user can pass an array
# there, which saves the trace as well as the compile).
_NUMBERS_NOTE = (
    "; or, as the programs differ only in the numbers they embed, "
    "af.filter_jit(share_numbers=True) compiles them once (each still traces)"
)


def _by_program(findings: Findings, fn: Callable[[Any], Any], tree, other) -> Findings:
    """`findings` with `recompiles` read off the programs `fn` traces to: a leaf
    that changes no program compiles only eqx.filter_jit again."""
    if not findings:
        return findings
    by_path: dict[str, int] = {}
    if jtu.tree_structure(tree) == jtu.tree_structure(other):
        with_paths = jtu.tree_flatten_with_path(tree)[0]
        by_path = {
            path_to_str(findings.name, path): i
            for i, (path, _) in enumerate(with_paths)
        }
    tried = sorted({by_path[f.path] for f in findings if f.path in by_path})
    differ, read = leaves_the_program_reads(fn, tree, other, tried)
    # Programs that differ only in numbers: a static field (held on purpose, no
    # leaf of the tree) needs no rewrite; other leaves keep their advice.
    shared = differ and numbers_only(fn, tree, other)
    kept = _kept_numbers(fn, other, findings, by_path, shared)
    exact = []
    for f in findings:
        # A new program: another structure, a static field (not tried alone),
        # or a leaf whose change alone makes another program.
        alone = f.path in by_path
        new_program = differ and (not alone or by_path[f.path] in read)
        jits = (EQX, AF) if f.kind == "structure" or new_program else (EQX,)
        hint = f.hint
        if f.path in kept:
            hint = kept[f.path]
        elif shared and f.kind != "structure":
            hint = _NUMBERS_HINT if f.path not in by_path else hint + _NUMBERS_NOTE
        exact.append(dataclasses.replace(f, recompiles=jits, hint=hint))
    causes = {}
    for old, new in zip(findings, exact, strict=True):
        number, line = findings._causes[id(old)]
        if new.hint is _NUMBERS_HINT:  # the cause's own fix does not apply
            line = f"{line.split('; fix: ')[0]}; {_NUMBERS_CAUSE}"
        elif new.path in kept:
            line = f"{line.split('; fix: ')[0]}; fix: {new.hint}"
        causes[id(new)] = (number, line)
    return Findings(exact, findings.name, causes, two_trees=True, programs_read=True)


def _kept_numbers(
    fn: Callable[[Any], Any],
    other: Any,
    findings: Findings,
    by_path: dict[str, int],
    shared: bool,
) -> dict[str, str]:
    """By path, the hint for Python numbers of `other` that `fn` cannot take as
    arrays (a trial trace with them as arrays raised, `_trial`), tried once per
    field: keep them numbers. Numbers that trace as arrays keep their hints."""
    fields: dict[str, list[str]] = {}
    for f in findings:
        if f.kind == "value" and f.path in by_path and type(f.other) in PYTHON_NUMBERS:
            fields.setdefault(f.field or f.path, []).append(f.path)
    name = findings.name
    function = function_name(fn)
    function = "fn" if function == "<lambda>" else function
    hints: dict[str, str] = {}
    for paths in fields.values():
        refused = in_call(lambda a: fn(a[name]), {name: other}, frozenset(paths))
        if refused is not None:
            numbers = "could share" if shared else None
            fix = kept_number_fix(str(refused), function, FILTER_JIT, numbers)
            hints.update(dict.fromkeys(paths, fix))
    return hints


def assert_clean(
    tree: Any, other: Any = None, *, name: str = "tree", jit: Jit = EQX
) -> None:
    """Raise `af.AuditError` (an `AssertionError`) with the report unless clean.

    Meant for tests: `af.assert_clean(model)` after building the model, or
    `af.assert_clean(scene_a, scene_b, jit="af.filter_jit")` to check that two
    instances built the same way share one compiled step under that jit (for
    two trees, findings that `jit` does not compile again for are not failures).

    !!! example

        ```python
        import equinox as eqx
        import jax
        import jax.numpy as jnp
        import arrayfield as af

        af.assert_clean({"w": jnp.zeros(3), "b": jnp.zeros(())})
        mlp = eqx.nn.MLP(2, 1, 8, 2, key=jax.random.key(0))
        other = eqx.nn.MLP(2, 1, 8, 2, key=jax.random.key(1))
        af.assert_clean(mlp, other)  # same structure, same activations
        ```
    """
    check_jit(jit)
    findings = audit(tree, other, name=name)
    if other is not None:
        failing = findings.compiling(jit)
        if failing:
            raise AuditError(str(findings))
    elif findings:
        raise AuditError(str(findings))
