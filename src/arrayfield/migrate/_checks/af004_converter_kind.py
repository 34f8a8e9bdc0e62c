"""AF004: a converter that makes the other kind of array than the annotation.

Under `af.ArrayModule` the annotation decides what a field holds, so the
codemod keeps such a converter rather than silently change the array type.
"""

from __future__ import annotations

from typing import Any

from .._annotations import ArrayKind
from .._diagnostics import Diagnostic
from .._site import FieldSite

CODE = "AF004"
# Its line in `arrayfield migrate --help`.
SUMMARY = (
    "converter kept because it makes NumPy arrays for a JAX-annotated "
    "field, or JAX arrays for an np.ndarray one: make the annotation say which"
)


def message(cls: str, field: str, converter: str, kind: ArrayKind) -> str:
    """`kind` is the annotation's array kind, "jax" or "numpy"."""
    if kind == "jax":
        return (
            f"field '{cls}.{field}' is annotated as a JAX array but "
            f"`converter={converter}` makes NumPy arrays. Under af.ArrayModule the "
            "annotation wins and the field will hold a JAX array: annotate it "
            "`np.ndarray` to keep NumPy, or delete the converter."
        )
    return (
        f"field '{cls}.{field}' is annotated `np.ndarray` but "
        f"`converter={converter}` makes JAX arrays, so it still holds JAX "
        "arrays. Annotate it `jax.Array` and delete the converter to let "
        "arrayfield do the conversion."
    )


def check(
    site: FieldSite, converter: Any, makes: ArrayKind, kind: ArrayKind
) -> Diagnostic | None:
    """For a field of array kind `kind` whose `converter` argument (with a
    `.value`) makes `makes` arrays."""
    if makes == kind:
        return None
    text = message(site.cls, site.name, site.snippet(converter.value), kind)
    return Diagnostic(*site.position(converter), CODE, text)
