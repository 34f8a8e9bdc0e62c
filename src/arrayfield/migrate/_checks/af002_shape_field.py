"""AF002: an array-annotated field that holds a shape, a size or a flag.

arrayfield would store it as an array, and an array cannot be a shape or a
Python condition under jit; `af.field(convert=False)` keeps it a Python value.
"""

from __future__ import annotations

from collections.abc import Mapping

from .._annotations import looks_like_shape
from .._diagnostics import Diagnostic
from .._facts import CONTROL, SHAPE, SHAPE_VALUE
from .._site import FieldEdit, FieldReading, FieldSite

CODE = "AF002"
# What `--fix` does to the field where its diagnostic is fixable.
FIX = FieldEdit.NO_CONVERT
# Its line in `arrayfield migrate --help`.
SUMMARY = (
    "array-annotated field used as a shape or size (in its class or a "
    "subclass), or assigned a shape-like value: declare it "
    "af.field(convert=False) (--fix does, for fields used so or assigned a "
    "helper's list of ints)"
)


def shape_like_message(cls: str, field: str, value: str, line: int | None) -> str:
    """`line` is where the value is assigned, None for the class default."""
    if line is None:
        where = f"defaults to `{value}`"
    else:
        where = f"is assigned `{value}` on line {line}"
    return (
        f"field '{cls}.{field}' is annotated as an array but {where}. "
        "If it holds a shape or indices, declare "
        "it `af.field(convert=False)` so it stays a Python value under jit; "
        "if it really is data, leave it."
    )


def shape_used_message(cls: str, field: str, use: str, where: str) -> str:
    """`use` is "a shape or size" or "a Python condition"; `where` is path:line."""
    return (
        f"field '{cls}.{field}' is annotated as an array but used as {use} at "
        f"{where}; arrayfield would store it as an array, which fails there under "
        "jit. Declare it `af.field(convert=False)` (--fix does) or static=True, "
        "or annotate the Python type it holds (e.g. `tuple[int, ...]`)."
    )


def helper_message(cls: str, field: str, helper: str, where: str) -> str:
    """`helper` returns a list of ints that is assigned to the field at `where`."""
    return (
        f"field '{cls}.{field}' is annotated as an array but is assigned the list "
        f"of ints that `{helper}(...)` returns ({where}): a shape. arrayfield "
        "would store it as an int32 array, which fails under jit wherever it is "
        "used as a shape or size. Declare it `af.field(convert=False)` (--fix "
        "does) or static=True, or annotate the Python type it holds (e.g. "
        "`tuple[int, ...]`)."
    )


def check_field(
    site: FieldSite, reading: FieldReading, found: Mapping[str, Diagnostic]
) -> Diagnostic | None:
    """For an array-annotated field that converts (not static, no
    `convert=False`). The diagnostic is `fixable` (by `af.field(convert=False)`)
    when the field is used so, or assigned a helper's list of ints."""
    if not reading.converts:
        return None
    uses = site.uses()
    for kind, use in ((SHAPE, "a shape or size"), (CONTROL, "a Python condition")):
        if kind in uses:
            text = shape_used_message(site.cls, site.name, use, uses[kind])
            return site.report(CODE, text, fixable=True)
    helper = site.context.helpers.get(site.name) if site.context else None
    if helper is not None:
        where = site.assigns()[SHAPE_VALUE]
        text = helper_message(site.cls, site.name, helper, where)
        return site.report(CODE, text, fixable=True)
    for value, statement in site.values():
        if looks_like_shape(value):
            line = None if statement is None else site.position(statement)[0]
            text = shape_like_message(site.cls, site.name, site.snippet(value), line)
            return site.report(CODE, text)
    return None
