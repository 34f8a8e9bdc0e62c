"""One module per diagnostic code: its condition, its message, its summary and
its fix.

Each module names its `CODE` and its `SUMMARY` (a line of `--help`). A rule
about a field statement defines `check_field(site, reading, found)`: it reads
the `FieldSite`, the driver's `FieldReading` and the diagnostics rules before
it found for the field, returns a `Diagnostic` or None, and changes nothing;
where its diagnostic is fixable, `FIX` is the `FieldEdit` that `--fix` makes.
`_plan` runs `FIELD_RULES` in order for every field and knows none of them.
A rule about calls defines `check_call(node, known)` (a list of diagnostics,
from the call and what `_plan` knows of the file's classes, `_site.CallContext`)
and `NEEDLES`, text without which a file holds no call it reports: the reader
visits calls only in files that have one. AF004 (a converter `_plan` drops
as it migrates a field) is the one rule `_plan` calls by name, from that edit.
A new code is a new module here, added to `RULES`.
"""

from __future__ import annotations

from . import (
    af001_scalar_field,
    af002_shape_field,
    af003_static_array,
    af004_converter_kind,
    af005_per_instance,
    af006_class_per_call,
    af007_trainable_constant,
    af008_axis_spec,
)

RULES = (
    af001_scalar_field,
    af002_shape_field,
    af003_static_array,
    af004_converter_kind,
    af005_per_instance,
    af006_class_per_call,
    af007_trainable_constant,
    af008_axis_spec,
)
# Code -> its line in `arrayfield migrate --help`.
CODES: dict[str, str] = {rule.CODE: rule.SUMMARY for rule in RULES}
# The rules `_plan` asks about every field statement, in this order (a rule
# may read what an earlier one found: AF007 gives way to AF002).
FIELD_RULES = tuple(rule for rule in RULES if hasattr(rule, "check_field"))
# The rules `_plan` asks about every call, in files `calls_matter` admits.
CALL_RULES = tuple(rule for rule in RULES if hasattr(rule, "check_call"))
_NEEDLES = tuple(needle for rule in CALL_RULES for needle in rule.NEEDLES)
_BYTE_NEEDLES = tuple(needle.encode() for needle in _NEEDLES)


def calls_matter(source: str | bytes) -> bool:
    """Whether a file may hold a call a rule reports (`NEEDLES`): the reader
    visits every call only then, which most files skip."""
    if isinstance(source, bytes):
        return any(needle in source for needle in _BYTE_NEEDLES)
    return any(needle in source for needle in _NEEDLES)
