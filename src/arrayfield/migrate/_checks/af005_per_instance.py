"""AF005: a non-array field holding a value made per instance.

eqx.filter_jit treats every non-array leaf as a static part of the model,
compared by equality: a lambda, a `functools.partial`, a string built per
instance or an object hashed by identity differs for every new instance, so
every new instance compiles again.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._annotations import scalar_annotation
from .._diagnostics import Diagnostic
from .._facts import LAMBDA, OBJECT, PARAM, PARTIAL, STRING
from .._names import dotted_name
from .._site import FieldReading, FieldSite

CODE = "AF005"
# Its line in `arrayfield migrate --help`.
SUMMARY = (
    "non-static field holding a value made per instance (a lambda, a "
    "functools.partial, a string set per instance, an object hashed by "
    "identity; pytrees are not reported, and a class from outside the project "
    "'may be' one): every new instance recompiles; the message says how to fix it"
)

# Kinds of per-instance values, in the order they are reported.
_PER_INSTANCE = (LAMBDA, PARTIAL, OBJECT, STRING)


def message(cls: str, field: str, kind: str, where: str, what: str) -> str:
    """`kind` is one of _facts's LAMBDA, PARTIAL, STRING, OBJECT; `what` names
    the class instantiated, for OBJECT."""
    head = f"field '{cls}.{field}' holds "
    tail = (
        "; eqx.filter_jit treats it as a static part of the model, so every new "
        "instance compiles again. "
    )
    if kind == LAMBDA:
        return (
            f"{head}a lambda made per instance ({where}), compared by identity{tail}"
            "Define the function once at module level and assign that function."
        )
    if kind == PARTIAL:
        return (
            f"{head}a functools.partial made per instance ({where}), compared by "
            f"identity{tail}Use jax.tree_util.Partial: its function is compared "
            "by equality and its arguments are traced leaves."
        )
    if kind == STRING:
        return (
            f"{head}a string that differs per instance ({where}){tail}Keep "
            "per-instance names and keys out of the jitted arguments (store them "
            "outside the model, or eqx.partition them off), or map them to an "
            "integer array index."
        )
    return (
        f"{head}a `{what}` object ({where}), hashed by identity{tail}Convert what "
        "the jitted code needs to arrays in a Module, or give the class "
        "value-based __eq__/__hash__ and declare the field static=True, or keep "
        "the object out of the jitted arguments."
    )


def maybe_pytree_message(cls: str, field: str, where: str, what: str) -> str:
    """For an object of a class defined outside the tree: it may be a pytree."""
    return (
        f"field '{cls}.{field}' holds a `{what}` object ({where}), of a class "
        "from outside this project that may be a pytree: if it is (a Module, a "
        "NamedTuple, a class registered with jax.tree_util), its leaves are traced "
        "and nothing needs to change; if it is not, it is hashed by identity, so "
        "every new instance "
        "compiles again: convert what the jitted code needs to arrays in a Module, "
        "or keep the object out of the jitted arguments. Do not declare a pytree "
        "static=True."
    )


def check_field(
    site: FieldSite, reading: FieldReading, found: Mapping[str, Diagnostic]
) -> Diagnostic | None:
    """For a field that is no array, not static, without an array converter."""
    if not reading.python_leaf or site.context is None:
        return None
    assigns = site.assigns()
    for kind in _PER_INSTANCE:
        if kind in assigns:
            what = site.context.objects.get(site.name, "")
            if kind == OBJECT and site.name in site.context.maybe_pytree:
                text = maybe_pytree_message(site.cls, site.name, assigns[kind], what)
                return site.report(CODE, text)
            text = message(site.cls, site.name, kind, assigns[kind], what)
            return site.report(CODE, text)
    annotated = dotted_name(site.annotation)
    if site.file is not None and annotated in site.file.plain_classes:
        where = assigns.get(PARAM, "a constructor argument")
        text = message(site.cls, site.name, OBJECT, where, annotated or "")
        return site.report(CODE, text)
    if scalar_annotation(site.annotation, site.imports, ("str",)) != "str":
        return None
    if PARAM in assigns:
        where = assigns[PARAM]
    elif site.context.init_from_args and site.node.value is None:
        where = "a constructor argument"
    else:
        return None
    return site.report(CODE, message(site.cls, site.name, STRING, where, ""))
