"""AF003: an array-annotated field declared `static=True`: static fields are
hashed and compared on every call, and arrayfield does not convert them, so an
array there is neither configuration nor a traced leaf."""

from __future__ import annotations

from collections.abc import Mapping

from .._diagnostics import Diagnostic
from .._site import FieldSite

CODE = "AF003"
SUMMARY = (
    "array-annotated field declared static=True: arrays are not "
    "hashable configuration; drop static=True or fix the annotation"
)


def check_field(site: FieldSite, found: Mapping[str, Diagnostic]) -> Diagnostic | None:
    if site.kind is None or not site.static:
        return None
    return site.report(
        CODE,
        "is annotated as an array but declared static=True. Static fields are "
        "hashed and compared on every call and arrayfield does not convert them. "
        "Drop static=True to make it a traced leaf, or annotate the Python type "
        "it holds (e.g. `tuple[int, ...]`).",
    )
