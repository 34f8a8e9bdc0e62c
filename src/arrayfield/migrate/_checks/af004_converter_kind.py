"""AF004: a converter that makes the other kind of array than the annotation.
Under `af.ArrayModule` the annotation wins, so the codemod keeps the converter
rather than silently change the array type (`_read` runs this rule)."""

from __future__ import annotations

from typing import Any

from .._annotations import ArrayKind
from .._diagnostics import Diagnostic
from .._site import FieldSite

CODE = "AF004"
SUMMARY = (
    "converter kept because it makes NumPy arrays for a JAX-annotated "
    "field, or JAX arrays for an np.ndarray one: make the annotation say which"
)


def check(
    site: FieldSite, converter: Any, makes: ArrayKind, kind: ArrayKind
) -> Diagnostic | None:
    """For a field of array kind `kind` whose `converter=` makes `makes` arrays."""
    if makes == kind:
        return None
    written = f"`converter={site.snippet(converter.value)}`"
    if kind == "jax":
        text = (
            f"is annotated as a JAX array but {written} makes NumPy arrays. Under "
            "af.ArrayModule the annotation wins and the field will hold a JAX "
            "array: annotate it `np.ndarray` to keep NumPy, or delete the converter."
        )
    else:
        text = (
            f"is annotated `np.ndarray` but {written} makes JAX arrays, so it "
            "still holds JAX arrays. Annotate it `jax.Array` and delete the "
            "converter to let arrayfield do the conversion."
        )
    return site.report(CODE, text, at=converter)
