"""AF007: a numeric constant in an array-annotated field becomes trainable.
Under `eqx.Module` a Python float stays out of `eqx.filter(model,
eqx.is_inexact_array)`, gradients and optimizer state; `af.ArrayModule` makes it
a floating array leaf that `jax.grad` differentiates and optax updates: a change
the code does not show, for a human to decide."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from .. import _syntax as syntax
from .._annotations import jaxtyping_dtype
from .._diagnostics import Diagnostic
from .._site import FieldEdit, FieldSite

CODE = "AF007"
FIX = FieldEdit.NO_CONVERT
SUMMARY = (
    "array-annotated field with a numeric default (or a number set in a "
    "method) that was a Python number: it now takes part in eqx.filter, "
    "gradients and optax updates; static=True, af.field(convert=False) "
    "(--fix does, unless # noqa: AF007 says it should train) or "
    "jax.lax.stop_gradient if it must not train"
)

# jaxtyping dtypes whose arrays are floating: an int constant becomes a float.
_FLOATING = frozenset({"Float", "BFloat", "Complex", "Inexact"})
# jaxtyping dtypes whose arrays are never floating: nothing becomes trainable.
_NOT_FLOATING = frozenset({"Int", "UInt", "Integer", "Bool", "Key"})
# Calls under these packages make arrays, which were arrays under eqx.Module too.
_ARRAY_PACKAGES = ("jax.", "numpy.", "jaxlib.")


def _bound(site: FieldSite, value: Any) -> Any | None:
    """What `value`, a module-level name bound once, is bound to, else None."""
    name = syntax.identifier(value)
    return None if name is None else site.module_values.get(name)


def _maybe_number(site: FieldSite, value: Any) -> bool:
    """Whether a default that is no number literal may still hold a Python
    number: a name or an attribute (a module constant), arithmetic, or a call of
    anything but an array constructor; not None, a bool, a string, a display, a
    lambda. A name bound once in the module is read through."""
    if syntax.identifier(value) in ("None", "True", "False", "Ellipsis"):
        return False
    bound = _bound(site, value)
    if bound is not None:  # a number literal is reported as one
        return syntax.number_type(bound) is None and _maybe_number(site, bound)
    if isinstance(value, ast.Name | ast.Attribute | ast.BinOp | ast.UnaryOp):
        return True
    if isinstance(value, ast.Call):
        called = site.imports.resolve(value.func) or ""
        return not called.startswith(_ARRAY_PACKAGES)
    return False


def check_field(site: FieldSite, found: Mapping[str, Diagnostic]) -> Diagnostic | None:
    """A numeric default, or a number a method assigns, of a converting array
    field of a migrated class; not one with a converter, an array under
    eqx.Module already, nor one AF002 fixes."""
    if not site.converts or not site.migrating or "AF002" in found:
        return None
    dtype = jaxtyping_dtype(site.annotation, site.imports)
    if "converter" in site.keywords or dtype in _NOT_FLOATING:
        return None  # an int or bool array is never trained
    for value, line in site.values():
        kind = syntax.number_type(value)
        if kind is None and line is None:  # a default may name a number
            kind = syntax.number_type(_bound(site, value))
        if kind is None or (kind is int and dtype not in _FLOATING):
            continue
        where = site.given(value, line, "is set to")
        text = (
            f"is annotated as an array and {where}: under eqx.Module it stayed a "
            "Python number, which eqx.filter(model, eqx.is_inexact_array) leaves "
            "out of gradients and optimizer state; under af.ArrayModule it is a "
            "floating array leaf that jax.grad differentiates and optax updates. "
            "If it is configuration, annotate it `float` and declare it "
            "static=True; to keep it a Python number, declare it "
            "`af.field(convert=False)` (what --fix writes: the field then holds "
            "what it held under eqx.Module); to keep it an array that is not "
            "trained, wrap its uses in `jax.lax.stop_gradient`. If it is a "
            "parameter to fit, leave it as it is (with # noqa: AF007, --fix leaves "
            "it too)."
        )
        return site.report(CODE, text, fixable=True)
    default = site.default
    if not _maybe_number(site, default):
        return None
    written = site.snippet(default)
    return site.report(
        CODE,
        f"is annotated as an array and defaults to `{written}`, which may be a "
        "Python number: if it is, it stayed one under eqx.Module (left out of "
        "gradients and optimizer state), and under af.ArrayModule it is a floating "
        "array leaf that jax.grad differentiates and optax updates. --fix cannot "
        "tell, so it leaves the field and exits with status 3: declare it "
        f"`af.field(default={written}, convert=False)` to keep what it held, or "
        "mark the line `# noqa: AF007` if it should train.",
        undecided=True,
    )
