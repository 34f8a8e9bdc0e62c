"""AF005: a non-array field holding a value made per instance (a lambda, a
`functools.partial`, a string, an object hashed by identity): eqx.filter_jit
compares such a static leaf by equality, so every new instance compiles again."""

from __future__ import annotations

from collections.abc import Mapping

from .._annotations import scalar_annotation
from .._diagnostics import Diagnostic
from .._facts import LAMBDA, OBJECT, PARAM, PARTIAL, STRING
from .._site import FieldSite
from .._syntax import dotted_name

CODE = "AF005"
SUMMARY = (
    "non-static field holding a value made per instance (a lambda, a "
    "functools.partial, a string set per instance, an object hashed by "
    "identity; pytrees are not reported, and a class from outside the project "
    "'may be' one): every new instance recompiles; the message says how to fix it"
)

# Per kind of value, in the order they are reported: what the field holds
# (made at {where}, of class {what}), and the fix.
_KINDS = {
    LAMBDA: (
        "a lambda made per instance ({where}), compared by identity",
        "Define the function once at module level and assign that function.",
    ),
    PARTIAL: (
        "a functools.partial made per instance ({where}), compared by identity",
        "Use jax.tree_util.Partial: its function is compared by equality and its "
        "arguments are traced leaves.",
    ),
    OBJECT: (
        "a `{what}` object ({where}), hashed by identity",
        "Convert what the jitted code needs to arrays in a Module, or give the "
        "class value-based __eq__/__hash__ and declare the field static=True, or "
        "keep the object out of the jitted arguments.",
    ),
    STRING: (
        "a string that differs per instance ({where})",
        "Keep per-instance names and keys out of the jitted arguments (store them "
        "outside the model, or eqx.partition them off), or map them to an "
        "integer array index.",
    ),
}


def _report(site: FieldSite, kind: str, where: str, what: str = "") -> Diagnostic:
    holds, fix = _KINDS[kind]
    return site.report(
        CODE,
        f"holds {holds.format(where=where, what=what)}; eqx.filter_jit treats it "
        f"as a static part of the model, so every new instance compiles again. {fix}",
    )


def check_field(site: FieldSite, found: Mapping[str, Diagnostic]) -> Diagnostic | None:
    if not site.python_leaf or site.context is None:
        return None
    assigns = site.assigns()
    what = site.context.objects.get(site.name, "")
    for kind in _KINDS:
        if kind not in assigns:
            continue
        if kind == OBJECT and site.name in site.context.maybe_pytree:
            return site.report(
                CODE,
                f"holds a `{what}` object ({assigns[kind]}), of a class from outside "
                "this project that may be a pytree: if it is (a Module, a NamedTuple, "
                "a class registered with jax.tree_util), its leaves are traced and "
                "nothing needs to change; if it is not, it is hashed by identity, so "
                "every new instance compiles again: convert what the jitted code "
                "needs to arrays in a Module, or keep the object out of the jitted "
                "arguments. Do not declare a pytree static=True.",
            )
        return _report(site, kind, assigns[kind], what)
    annotated = dotted_name(site.annotation)
    if site.file is not None and annotated in site.file.plain_classes:
        where = assigns.get(PARAM, "a constructor argument")
        return _report(site, OBJECT, where, annotated or "")
    if scalar_annotation(site.annotation, site.imports, ("str",)) != "str":
        return None
    if PARAM in assigns:
        return _report(site, STRING, assigns[PARAM])
    if site.context.init_from_args and site.node.value is None:
        return _report(site, STRING, "a constructor argument")
    return None
