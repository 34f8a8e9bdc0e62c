"""AF007: a numeric constant in an array-annotated field becomes trainable.

Under `eqx.Module` a Python float in a field stays a Python float, which
`eqx.filter(model, eqx.is_inexact_array)` leaves out of gradients and optimizer
state. `af.ArrayModule` stores it as a floating array leaf, so `jax.grad`
differentiates it and optax updates it: a behaviour change the rewrite cannot
see from the code, and a human decides about.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from .. import _syntax as syntax
from .._diagnostics import Diagnostic
from .._site import FieldEdit, FieldReading, FieldSite

CODE = "AF007"
# What `--fix` does to the field where its diagnostic is fixable.
FIX = FieldEdit.NO_CONVERT
# Its line in `arrayfield migrate --help`.
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


def message(cls: str, field: str, value: str, line: int | None) -> str:
    """`line` is where `value` is assigned in a method, None for the default."""
    where = (
        f"defaults to `{value}`"
        if line is None
        else (f"is set to `{value}` on line {line}")
    )
    return (
        f"field '{cls}.{field}' is annotated as an array and {where}: under "
        "eqx.Module it stayed a Python number, which eqx.filter(model, "
        "eqx.is_inexact_array) leaves out of gradients and optimizer state; "
        "under af.ArrayModule it is a floating array leaf that jax.grad "
        "differentiates and optax updates. If it is configuration, annotate it "
        "`float` and declare it static=True; to keep it a Python number, declare "
        "it `af.field(convert=False)` (what --fix writes: the field then holds "
        "what it held under eqx.Module); to keep it an array that is not "
        "trained, wrap its uses in `jax.lax.stop_gradient`. If it is a parameter "
        "to fit, leave it as it is (with # noqa: AF007, --fix leaves it too)."
    )


def undecided_message(cls: str, field: str, value: str) -> str:
    """For a default that may be a Python number (a name, an attribute, an
    expression): --fix cannot tell, and says so by its exit status."""
    return (
        f"field '{cls}.{field}' is annotated as an array and defaults to "
        f"`{value}`, which may be a Python number: if it is, it stayed one under "
        "eqx.Module (left out of gradients and optimizer state), and under "
        "af.ArrayModule it is a floating array leaf that jax.grad differentiates "
        "and optax updates. --fix cannot tell, so it leaves the field and exits "
        f"with status 3: declare it `af.field(default={value}, convert=False)` to "
        "keep what it held, or mark the line `# noqa: AF007` if it should train."
    )


# Calls under these packages make arrays, which were arrays under eqx.Module too.
_ARRAY_PACKAGES = ("jax.", "numpy.", "jaxlib.")


def _maybe_number(site: FieldSite, value: Any) -> bool:
    """Whether a class default that is no number literal may still hold a
    Python number: a name or an attribute (a module constant), arithmetic, or a
    call of anything but an array constructor; not None, a bool, a string, a
    display, a lambda. A name bound once in the module is read through."""
    if _dtype_name(site) in _NOT_FLOATING:
        return False  # an int or bool array is never trained
    name = syntax.identifier(value)
    if name in ("None", "True", "False", "Ellipsis"):
        return False
    bound = site.module_values.get(name) if name is not None else None
    if bound is not None:
        # Its value decides: a number literal is reported as one (`_defined`).
        return syntax.number_type(bound) is None and _maybe_number(site, bound)
    if name is not None or isinstance(value, ast.Attribute):
        return True
    if isinstance(value, ast.Call):
        called = site.imports.resolve(value.func) or ""
        return not called.startswith(_ARRAY_PACKAGES)
    return isinstance(value, ast.BinOp | ast.UnaryOp)


def _defined(site: FieldSite, value: Any) -> Any:
    """`value`, or the number literal a module-level name is bound to once."""
    name = syntax.identifier(value)
    bound = site.module_values.get(name) if name is not None else None
    if bound is not None and syntax.number_type(bound) is not None:
        return bound
    return value


def _dtype_name(site: FieldSite) -> str | None:
    """`Float` for `Float[Array, ""]` (any import spelling), else None."""
    annotation = site.annotation
    if not isinstance(annotation, ast.Subscript):
        return None
    resolved = site.imports.resolve(annotation.value) or ""
    if not resolved.startswith("jaxtyping."):
        return None
    return resolved.rpartition(".")[2].rstrip("0123456789")


def _trainable(site: FieldSite, value: Any) -> bool:
    kind = syntax.number_type(value)
    if kind is None:
        return False
    dtype = _dtype_name(site)
    if dtype in _NOT_FLOATING:
        return False
    return kind is not int or dtype in _FLOATING


def check_field(
    site: FieldSite, reading: FieldReading, found: Mapping[str, Diagnostic]
) -> Diagnostic | None:
    """For an array-annotated field that converts, of a class this run
    migrates, and that is no shape field (AF002 fixes that one): a numeric
    class default, or a number literal assigned in a method. A field with a
    converter is left alone: `converter=jnp.asarray` made it an array (and
    trainable) under eqx.Module already."""
    if not reading.converts or not reading.migrating or "AF002" in found:
        return None
    if "converter" in site.keywords:
        return None
    for value, statement in site.values():
        if _trainable(site, _defined(site, value) if statement is None else value):
            line = None if statement is None else site.position(statement)[0]
            text = message(site.cls, site.name, site.snippet(value), line)
            return site.report(CODE, text, fixable=True)
    default = site.default
    if default is not None and _maybe_number(site, default):
        text = undecided_message(site.cls, site.name, site.snippet(default))
        return site.report(CODE, text, undecided=True)
    return None
