"""AF002: an array-annotated field that holds a shape, a size or a flag, which
an array cannot be under jit; `af.field(convert=False)` keeps it a Python value."""

from __future__ import annotations

from collections.abc import Mapping

from .._annotations import looks_like_shape
from .._diagnostics import Diagnostic
from .._facts import CONTROL, SHAPE, SHAPE_VALUE
from .._site import FieldEdit, FieldSite

CODE = "AF002"
FIX = FieldEdit.NO_CONVERT
SUMMARY = (
    "array-annotated field used as a shape or size (in its class or a "
    "subclass), or assigned a shape-like value: declare it "
    "af.field(convert=False) (--fix does, for fields used so or assigned a "
    "helper's list of ints)"
)

_FIXED = (
    " Declare it `af.field(convert=False)` (--fix does) or static=True, or "
    "annotate the Python type it holds (e.g. `tuple[int, ...]`)."
)


def check_field(site: FieldSite, found: Mapping[str, Diagnostic]) -> Diagnostic | None:
    """Fixable (by `af.field(convert=False)`) for a field used as a shape or
    a condition, or assigned a helper's list of ints; said for a field with a
    value that looks like a shape."""
    if not site.converts:
        return None
    uses = site.uses()
    for kind, use in ((SHAPE, "a shape or size"), (CONTROL, "a Python condition")):
        if kind in uses:
            text = (
                f"is annotated as an array but used as {use} at {uses[kind]}; "
                "arrayfield would store it as an array, which fails there under "
                f"jit.{_FIXED}"
            )
            return site.report(CODE, text, fixable=True)
    helper = site.context.helpers.get(site.name) if site.context else None
    if helper is not None:
        text = (
            "is annotated as an array but is assigned the list of ints that "
            f"`{helper}(...)` returns ({site.assigns()[SHAPE_VALUE]}): a shape. "
            "arrayfield would store it as an int32 array, which fails under jit "
            f"wherever it is used as a shape or size.{_FIXED}"
        )
        return site.report(CODE, text, fixable=True)
    for value, line in site.values():
        if looks_like_shape(value):
            where = site.given(value, line, "is assigned")
            text = (
                f"is annotated as an array but {where}. If it holds a shape or "
                "indices, declare it `af.field(convert=False)` so it stays a "
                "Python value under jit; if it really is data, leave it."
            )
            return site.report(CODE, text)
    return None
