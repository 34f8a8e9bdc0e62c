"""Why a leaf is part of the cache key, and the one fix that applies: the texts
`explain_retraces` and `audit` give.

An int may be a shape, size or id and must then stay a Python int, so the advice
for numbers depends on the field's annotation and class (`number_fix`).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np

from .._convert import Rejected, to_array
from .._declare import field_converters
from .._errors import format_annotation
from .._facts import PYTHON_NUMBERS
from .._field import OPTIONS_KEY
from .._module import ArrayModule
from .._spec import ArraySpec, FieldSpec, Unresolved, field_spec
from ._annotations import field_annotation
from ._paths import FieldRef
from ._signature import LeafSig

# Which jit a site's traces come from; the reasons name it. None: not known (a
# plain function traced by whatever jit its caller uses).
FILTER_JIT = "eqx.filter_jit"
JAX_JIT = "jax.jit"


# Where advice moves a Python number into an array leaf (the swap to
# af.ArrayModule, or an array annotation): the fixes of the codemod's AF007.
TRAINABLE = (
    "; that makes it trainable: as a Python number, eqx.filter(model, "
    "eqx.is_inexact_array) leaves it out of gradients and optimizer state, as a "
    "floating array leaf jax.grad differentiates it and optax updates it. If it is "
    "a constant: if it is configuration, annotate it `float` and declare it "
    "static=True; to keep it a Python number, declare it "
    "`af.field(convert=False)`; to keep it an array that is not trained, wrap its "
    "uses in `jax.lax.stop_gradient`"
)

# For a weakly typed array: `audit` finds one, `explain_retraces` sees a flip.
WEAK_FIX = (
    "create it with an explicit dtype, jnp.asarray(x, dtype=jnp.float32), or "
    "pass the Python number itself to an af.ArrayModule array field, which "
    "stores it strongly typed"
)

STRUCTURE_FIX = (
    "keep the structure fixed from call to call: store an array instead of "
    "switching between None and an array, and keep the same keys and fields"
)


_COMPILES = re.compile(r"\bcompiles( again)?\b")


def traced_only(why: str) -> str:
    """A reason's text for a trace that compiled nothing (af.filter_jit ran a
    program compiled before): what the change costs is a trace, not a compile."""
    return _COMPILES.sub("traces again", why)


def article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


@dataclasses.dataclass(frozen=True)
class Reason:
    """Why one leaf's cache-key entry changed, and the one fix that applies.

    `cause` sorts the change: `"structure"` (a shape, dtype, weak type or the
    pytree itself), `"callable"`, `"identity"` (an object compared by identity) or
    `"value"` (a number, string or other value that differs).
    """

    why: str
    fix: str
    cause: str


def leaf_reason(o: LeafSig, n: LeafSig, jit: str | None) -> Reason:
    """Why the cache-key entry of one leaf changed from `o` to `n`, and the fix;
    the fix names the field holding the leaf, where it is declared."""
    reason = _reason(o, n, jit)
    field = n.named_by or o.named_by
    if field is not None and "(declared as " not in reason.fix:
        reason = dataclasses.replace(reason, fix=reason.fix + field.named)
    return reason


def _reason(o: LeafSig, n: LeafSig, jit: str | None) -> Reason:
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
            fix = WEAK_FIX + " (a weak array you pass is kept weak)"
        return Reason(why, fix, "structure")
    if n.kind == "static" or o.kind == "static":
        if callable(o.key) and callable(n.key):
            return _callable_reason(static=True)
        if n.kind == o.kind and _by_identity(n.key) and type(o.key) is type(n.key):
            return _identity_reason(n.type, static=True)
        return Reason(
            "a static=True field is part of the cache key, and its value changed",
            _STATIC_FIELD_FIX,
            "value",
        )
    if n.kind == "hashed":
        return _hashed_reason(o, n, jit)
    kind = o.type.__name__
    return Reason(  # a hashed value became an array
        f"was {article(kind)} {kind} (hashed into the cache key), is an array now",
        "pass the same kind of value every call; an array every time is best",
        "structure",
    )


# What a static field's number is used for is not in the arguments: a slice
# start or an origin must stay a number (as an array it cannot start a static
# slice), a shape keeps its compiles, arithmetic could read an array.
_STATIC_FIELD_FIX = (
    "expected if it is a setting that takes a few values or a shape. A number "
    "that places or offsets things (a slice start, an origin) must stay static: "
    "af.filter_jit(..., share_numbers=True) runs one shared program for all "
    "its values after the first; one that arithmetic alone reads can drop "
    "static=True and be an array field, which saves the trace too"
)


def kept_number_fix(
    refused: str, function: str, jit: str | None, numbers: str | None
) -> str:
    """For Python numbers that a trial trace showed cannot be arrays (`refused`:
    the error, and where): keep them numbers, and what shares the program over
    their values under the jit in use (`numbers` as `_record.Site.traced`)."""
    head = (
        f"keep it a Python number: {function} uses it as a Python value (a slice "
        "start, a size, an if or max()), so an array cannot replace it (traced "
        f"with it as an array, {function} raised {refused}); each new value is a "
        "new trace. "
    )
    if numbers in ("shared", "generalised"):
        return head + (
            "share_numbers=True shares one program over its values, so nothing "
            "needs to change"
        )
    if numbers == "new family":
        return head + (
            "share_numbers=True shares one program over its values; this trace "
            "started a family for what the program says below"
        )
    if jit == JAX_JIT:
        return head + (
            "Keep it in static_argnums; af.filter_jit(..., share_numbers=True) "
            "compiles one program for every trace that differs only in such "
            "numbers, with no change to the code"
        )
    return head + (
        "af.filter_jit(..., share_numbers=True) compiles one program for every "
        "trace that differs only in such numbers, with no change to the code "
        "(its results may then differ from eqx.filter_jit's in the last bits)"
    )


_STATIC_FIX = (
    "if it changes from call to call, take it out of static_argnums/static_argnames "
    "so that jax.jit traces it"
)


def _by_identity(x: Any) -> bool:
    """Whether `x` is compared by identity: its class defines no `__eq__`."""
    return type(x).__eq__ is object.__eq__


def _identity_reason(cls: type, static: bool = False) -> Reason:
    name = cls.__qualname__
    where = "a static=True field" if static else f"{article(name)} {name}"
    return Reason(
        f"{where} is hashed into the cache key, and {name} compares by identity "
        "(it defines no __eq__), so every new object compiles again, even with "
        "equal contents",
        f"give {name} value equality (__eq__ and __hash__ over what it holds), or "
        "keep it out of the jitted arguments (close over one object, or pass the "
        "arrays the step needs from it)",
        "identity",
    )


def _callable_reason(static: bool = False) -> Reason:
    where = "a static=True field holds" if static else "this is"
    why = (
        f"{where} a different callable object: functions, lambdas and "
        "functools.partial objects are hashed by identity, so a fresh one per call "
        "compiles again"
    )
    return Reason(
        why,
        "create the closure or partial once, outside the loop (a jax.jit "
        "wrapper: jit the function once at module level), or pass what differs "
        "as an argument (an array), or hold it in an eqx.Module or eqx.Partial, "
        "whose arrays are traced; af.filter_jit traces again too, but compiles "
        "again only where the new trace is a different program",
        "callable",
    )


def _hashed_reason(o: LeafSig, n: LeafSig, jit: str | None) -> Reason:
    was_array = o.kind == "array"
    kind = n.type.__name__
    if type(n.key) in PYTHON_NUMBERS:
        if was_array:
            why = f"was an array, is a Python {kind} now (hashed into the cache key)"
        elif jit == JAX_JIT:
            why = (
                f"a static argument of jax.jit (static_argnums/static_argnames) is "
                f"hashed into the cache key, so every new value of this Python {kind} "
                "compiles again"
            )
            return Reason(why, _STATIC_FIX, "value")
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
        cause = "structure" if was_array else "value"
        fix = number_fix(
            n.field, n.key, n.within, changed=not was_array, shape=n.within_shape
        )
        return Reason(why, fix, cause)
    if callable(n.key) and callable(o.key) and not was_array:
        return _callable_reason()
    if callable(n.key):
        return Reason(
            "a different callable object: functions, lambdas and functools.partial "
            "objects are hashed by identity, so a fresh one per call compiles again",
            "create the closure or partial once, outside the loop, or make it an "
            "eqx.Module (or eqx.Partial) so the values it captures are traced",
            "structure" if was_array else "callable",
        )
    if was_array:
        return Reason(
            f"was an array, is {article(kind)} {kind} now (hashed into the cache key)",
            "pass the same kind of value every call; an array every time is best",
            "structure",
        )
    if _by_identity(n.key) and type(o.key) is type(n.key) and jit != JAX_JIT:
        return _identity_reason(n.type)
    a_kind = f"{article(kind)} {kind}"
    fix = (
        "keep values that change from call to call out of the jitted arguments "
        "(or make them arrays); mark fixed settings eqx.field(static=True)"
    )
    if type(n.key) is str:
        fix = (
            "a string is part of the cache key by value, in a static=True field "
            "too: keep strings that differ per instance or per call (ids, names) "
            "out of the jitted arguments, e.g. in a dict beside the Module"
        )
    if jit == JAX_JIT:
        why = (
            f"{a_kind} static argument of jax.jit is hashed into the cache key, and "
            "its value changed"
        )
        return Reason(why, _STATIC_FIX, "value")
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
    return Reason(why, fix, "value")


def number_fix(
    field: FieldRef | None,
    value: Any = None,
    within: FieldRef | None = None,
    changed: bool = False,
    shape: tuple[int, ...] | None = None,
) -> str:
    """How to stop a Python number in this position from being hashed: the fix
    below, and first, where the field is declared in an installed package, the
    one the user can make without editing it."""
    fix = _number_fix(field, value, within, changed, shape)
    ref = field or within
    package = None if ref is None else ref.package
    if ref is None or package is None or bypassed_init(field):
        return fix  # (af.normalize is the user's own, not the package's)
    return (
        f"{ref.where} is declared in the installed package {package}, so from your "
        "own code: where its value changes between calls, give it an array, "
        "jnp.asarray(x, dtype=...), wherever you set it (the package's setter, "
        f"eqx.tree_at, the constructor), with no change to {package}. In "
        f"{package} itself: {fix}"
    )


def _number_fix(
    field: FieldRef | None,
    value: Any,
    within: FieldRef | None,
    changed: bool,
    shape: tuple[int, ...] | None,
) -> str:
    """How to stop a Python number in this position from being hashed. An int
    may be a shape, size or id, which must stay a Python int: no array advice,
    unless `changed`, the value was seen changing between calls (then it is data,
    and static is never advised: a value that changes every call would compile
    every call). `within` is the field the number is inside (an element of its
    tuple), `shape` that container's where it holds Python numbers only."""
    if changed and field is None and within is None and type(value) is int:
        return (
            "its value changes between calls, so it is data, not a shape: pass an "
            "array, jnp.asarray(x, dtype=...)"
        )
    if changed and field is not None:
        fix = _changing_number_fix(field)
        if fix is not None:
            return fix
    if field is None and type(value) is int and within is not None:
        if opted_out(within):
            return kept_int_fix(within)
        if type(_spec_of(within)) is ArraySpec and not bypassed_init(within):
            return (
                f"{within.where} is annotated "
                f"{format_annotation(within.annotation)} but holds Python ints: if "
                "they are a shape, size or indices, declare it "
                "af.field(convert=False), as arrayfield migrate's AF002 advises "
                "(af.ArrayModule would store an array, which cannot be a shape "
                f"under jit); if they are data, store an array in it{within.declared}"
            )
    if field is None and within is not None and shape is not None:
        fix = _numbers_in_container_fix(within, shape, value, changed)
        if fix is not None:
            return fix
    if field is None and type(value) is int:
        return (
            "if this int is a shape, size, count or id, keep it static "
            "(static_argnums, eqx.field(static=True)); if it changes every call, "
            "pass an array, jnp.asarray(x, dtype=...)"
        )
    if field is None and within is not None:  # inside a container of a field
        return (
            f"{within.where} is annotated {format_annotation(within.annotation)} "
            "and holds this Python number inside it: store an array there "
            "instead, jnp.asarray(x, dtype=...)"
            f"{within.declared}"
        )
    if field is None:
        return (
            "pass an array instead, jnp.asarray(x, dtype=...), or store the value "
            "in an af.ArrayModule field"
        )
    annotation = field.annotation
    try:
        resolved = field_annotation(field)
    except Unresolved:
        resolved = annotation
    spelled = format_annotation(annotation)
    spec = field_spec(resolved)
    if spec is not None:
        if any(t in PYTHON_NUMBERS for t in getattr(spec, "passthrough", ())):
            return (
                f"{field.where} is annotated {spelled}, which names a Python number "
                "type, so a Python number is stored as it is: drop the number type "
                '(e.g. Float[Array, ""]) on an af.ArrayModule to store it as an '
                f"array, or pass an array{_trainable(spec, value)}{field.declared}"
            )
        if bypassed_init(field):
            return normalize_fix(field)
        if opted_out(field):
            if type(value) is int:
                return kept_int_fix(field)
            return (
                f"{field.where} is af.field(convert=False), so the Python number is "
                "stored as it is: store an array in it, or drop convert=False"
                f"{field.declared}"
            )
        if not issubclass(field.owner, ArrayModule):
            return (
                f"{field.where} is annotated {spelled} but holds a Python number: "
                f"subclass af.ArrayModule instead of eqx.Module, and it is stored "
                f"as a strongly typed array{_trainable(spec, value)}{field.declared}"
            )
        return (
            f"{field.where} is annotated {spelled} but is not converted; store an "
            f"array in it{field.declared}"
        )
    swap = _swap(field)
    if type(value) is int and not (
        isinstance(resolved, type) and issubclass(resolved, float | complex)
    ):
        return (
            f"{field.where} is annotated {spelled}: if its value changes between "
            'calls (a step counter, an index into data), annotate it Int[Array, ""]'
            f"{swap}, so it is stored as an array and traced; if it is a shape, "
            "size or id that stays fixed, declare it eqx.field(static=True) (a "
            "static field is no leaf: eqx.tree_at cannot update it)"
            f"{field.declared}"
        )
    if isinstance(resolved, type) and issubclass(resolved, PYTHON_NUMBERS):
        kind = _ARRAY_FOR_NUMBER.get(resolved, "Float")
        return (
            f'{field.where} is annotated {spelled}: annotate it {kind}[Array, ""]'
            f"{swap}, so it is stored as an array and traced; if it is a setting "
            "that stays fixed, declare it eqx.field(static=True)"
            f"{field.declared}"
        )
    return (
        f"store an array in {field.where} (annotated {spelled}), e.g. "
        f"jnp.asarray(x, dtype=...){field.declared}"
    )


# The array annotation for a field annotated with a Python number type.
_ARRAY_FOR_NUMBER = {bool: "Bool", int: "Int", float: "Float", complex: "Complex"}


def _changing_number_fix(field: FieldRef) -> str | None:
    """The fix for a field annotated as a Python number whose value was seen
    changing between calls: the array annotation to write, and nothing static."""
    try:
        resolved = field_annotation(field)
    except Unresolved:
        return None
    kind = _ARRAY_FOR_NUMBER.get(resolved) if isinstance(resolved, type) else None
    if kind is None:
        return None
    swap = _swap(field)
    return (
        f"{field.where} is annotated {format_annotation(field.annotation)} and its "
        f'value changes between calls: annotate it {kind}[Array, ""]{swap}, so it '
        f"is stored as an array and traced{field.declared}"
    )


def _swap(field: FieldRef) -> str:
    """What an array annotation needs besides itself: nothing on an ArrayModule."""
    if issubclass(field.owner, ArrayModule):
        return ""
    return ", and subclass af.ArrayModule instead of eqx.Module"


def _numbers_in_container_fix(
    within: FieldRef, shape: tuple[int, ...], value: Any, changed: bool
) -> str | None:
    """For a number in a list or tuple of numbers held by a field that is not an
    array field: the array annotation that stores the whole container as one
    array. Ints that were not seen changing may be a shape: no advice here."""
    if type(value) is int and not changed:
        return None
    spec = _spec_of(within)
    if spec is not None or opted_out(within):
        return None  # an array field, or kept as it is on purpose
    kind = _ARRAY_FOR_NUMBER[type(value)]
    dims = " ".join(map(str, shape))
    return (
        f"{within.where} is annotated {format_annotation(within.annotation)} and "
        f'holds Python numbers: annotate it {kind}[Array, "{dims}"]{_swap(within)}, '
        f"so they are stored as one array and traced{within.declared}"
    )


def _spec_of(field: FieldRef) -> FieldSpec | None:
    try:
        return field_spec(field_annotation(field))
    except Unresolved:
        return None


def _trainable(spec: FieldSpec, value: Any) -> str:
    """`TRAINABLE` if arrayfield would store `value` as a floating array (what an
    optimizer trains), else nothing. Asks the conversion itself: an int becomes
    a float in a `Float[...]` field, and stays an int in an `Array` one."""
    if type(spec) is not ArraySpec or type(value) not in PYTHON_NUMBERS:
        return ""
    try:
        stored = to_array(value, spec)
    except Rejected:
        return ""  # arrayfield refuses it, with its own error
    dtype = getattr(stored, "dtype", None)
    return TRAINABLE if dtype is not None and np.issubdtype(dtype, np.inexact) else ""


def opted_out(field: FieldRef | None) -> bool:
    """Whether the field is `af.field(convert=False)`: kept a Python value."""
    if field is None:
        return False
    options = field.field.metadata.get(OPTIONS_KEY)
    return options is not None and not options.convert


def kept_int_fix(field: FieldRef) -> str:
    """For an int in an `af.field(convert=False)` field: what `arrayfield
    migrate` (AF002) says such a field is for, so both tools agree."""
    return (
        f"{field.where} is af.field(convert=False), so this int stays a Python "
        "int, hashed into the cache key: right for a shape, size or index, which "
        "must stay a Python value under jit (a new one compiles again, as a new "
        "shape does anyway); a value that changes every call, such as a step, "
        f"belongs in an array: drop convert=False{field.declared}"
    )


def bypassed_init(field: FieldRef | None) -> bool:
    """Whether arrayfield converts this field when its Module is built, so that an
    unconverted value in it came in without `__init__` (`eqx.tree_at`,
    `jax.tree.map`, `tree_unflatten`, a loaded checkpoint)."""
    return field is not None and field.name in field_converters(field.owner)


def normalize_fix(field: FieldRef) -> str:
    return (
        f"{field.where} is converted when the Module is built, but this value "
        "came in without __init__ (eqx.tree_at, jax.tree.map, tree_unflatten or a "
        "loaded checkpoint): pass the tree through af.normalize(tree) after "
        f"building it{field.declared}"
    )
