"""AF003: an array-annotated field declared `static=True`.

Static fields are hashed and compared on every call, and arrayfield does not
convert them: an array there is neither configuration nor a traced leaf.
"""

from __future__ import annotations

from .._diagnostics import Diagnostic
from .._site import FieldSite

CODE = "AF003"


def message(cls: str, field: str) -> str:
    return (
        f"field '{cls}.{field}' is annotated as an array but declared "
        "static=True. Static fields are hashed and compared on every call and "
        "arrayfield does not convert them. Drop static=True to make it a traced "
        "leaf, or annotate the Python type it holds (e.g. `tuple[int, ...]`)."
    )


def check(site: FieldSite) -> Diagnostic:
    """For an array-annotated field whose specifier says `static=True`."""
    return Diagnostic(*site.position(site.target), CODE, message(site.cls, site.name))
