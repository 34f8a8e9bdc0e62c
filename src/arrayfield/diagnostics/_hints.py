"""Why a leaf is part of the cache key, and the one fix that applies: the texts
`explain_retraces` and `audit` give.

An int may be a shape, size or id and must then stay a Python int, so the advice
for numbers depends on the field's annotation and class (`number_fix`).
"""

from __future__ import annotations

from typing import Any

from .._errors import format_annotation
from .._internals import PYTHON_NUMBERS
from .._module import ArrayModule
from .._spec import Unresolved, field_spec, resolve_annotation
from ._paths import FieldRef
from ._signature import LeafSig

# Which jit a site's traces come from; the reasons name it. None: not known (a
# plain function traced by whatever jit its caller uses).
FILTER_JIT = "eqx.filter_jit"
JAX_JIT = "jax.jit"


STRUCTURE_FIX = (
    "keep the structure fixed from call to call: store an array instead of "
    "switching between None and an array, and keep the same keys and fields"
)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def leaf_reason(o: LeafSig, n: LeafSig, jit: str | None) -> tuple[str, str]:
    """`(why, fix)` for one leaf whose cache-key entry changed from `o` to `n`."""
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
        return why, fix
    if n.kind == "static" or o.kind == "static":
        return (
            "a static=True field is part of the cache key, and its value changed",
            "expected if it is a setting that takes a few values; if it changes "
            "from step to step, make it an ordinary array field",
        )
    if n.kind == "hashed":
        return _hashed_reason(n, o.kind == "array", jit)
    kind = o.type.__name__
    return (  # a hashed value became an array
        f"was {_article(kind)} {kind} (hashed into the cache key), is an array now",
        "pass the same kind of value every call; an array every time is best",
    )


_STATIC_FIX = (
    "if it changes from call to call, take it out of static_argnums/static_argnames "
    "so that jax.jit traces it"
)


def _hashed_reason(n: LeafSig, was_array: bool, jit: str | None) -> tuple[str, str]:
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
        if any(t in PYTHON_NUMBERS for t in getattr(spec, "passthrough", ())):
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
    if isinstance(resolved, type) and issubclass(resolved, PYTHON_NUMBERS):
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
