"""One module per diagnostic code, with its `CODE`, `SUMMARY` (a line of `--help`),
condition, message and fix: a field rule's `check_field(site, found)`
(`found`: what earlier rules reported for the field) and `FIX` where fixable, a
call rule's `check_call(node, known)` and `NEEDLES`. `_read` names no rule but
AF004, which it runs from its converter edit, and AF009, for bases it cannot resolve."""

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
    af009_unresolved_base,
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
    af009_unresolved_base,
)
CODES: dict[str, str] = {rule.CODE: rule.SUMMARY for rule in RULES}
# In this order: a rule may read what an earlier one found (AF007 gives way to AF002).
FIELD_RULES = tuple(rule for rule in RULES if hasattr(rule, "check_field"))
CALL_RULES = tuple(rule for rule in RULES if hasattr(rule, "check_call"))
_NEEDLES = tuple(needle for rule in CALL_RULES for needle in rule.NEEDLES)
_BYTE_NEEDLES = tuple(needle.encode() for needle in _NEEDLES)


def calls_matter(source: str | bytes) -> bool:
    """Whether a file may hold a call a rule reports (it has a rule's `NEEDLES`):
    only then does the reader visit every call, which most files skip."""
    if isinstance(source, bytes):
        return any(needle in source for needle in _BYTE_NEEDLES)
    return any(needle in source for needle in _NEEDLES)
