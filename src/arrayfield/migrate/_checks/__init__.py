"""One module per diagnostic code: its condition, its message, its summary and
its fix.

Each module names its `CODE` and its `SUMMARY` (a line of `--help`). A rule
about a field statement defines `check_field(site, reading, found)`: it reads
the `FieldSite`, the driver's `FieldReading` and the diagnostics rules before
it found for the field, returns a `Diagnostic` or None, and changes nothing;
where its diagnostic is fixable, `FIX` is the `FieldEdit` that `--fix` makes.
`_plan` runs `FIELD_RULES` in order for every field and knows none of them.
Rules about other nodes (AF004 a converter `_plan` drops, AF006 a `type(...)`
call, AF008 an axis keyword) are called where `_plan` reads those nodes.
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
