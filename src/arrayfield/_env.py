"""Switches read from the environment, spelled one way for every feature."""

import os

# The switches, documented in the README: validation of new ArrayModule classes,
# and explaining every retrace in the process.
CHECK = "ARRAYFIELD_CHECK"
EXPLAIN_RETRACES = "ARRAYFIELD_EXPLAIN_RETRACES"
# How many times one af.filter_jit function may trace again because a Python
# number among its arguments changed before it warns; 0 turns the warning off.
RETRACE_LIMIT = "ARRAYFIELD_RETRACE_LIMIT"
# Retraces for new Python numbers before af.filter_jit warns unasked: an
# 8-field survey (one trace per field, 7 retraces) is told before it ends.
DEFAULT_RETRACE_LIMIT = 7

_OFF = ("", "0", "false", "no", "off")


def env_flag(name: str) -> bool:
    """Whether the environment variable `name` is set to something other than off.

    `1`, `true`, `yes`, `on` (any case) switch a feature on; unset, empty, `0`,
    `false`, `no` and `off` leave it off.
    """
    return os.environ.get(name, "").strip().lower() not in _OFF


def env_count(name: str, default: int) -> int:
    """The environment variable `name` as a count (`default` when unset or empty).

    Raises `ValueError` naming the variable for anything but a whole number >= 0.
    """
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit():
        raise ValueError(
            f"{name}={text!r}: expected a whole number >= 0 (0 turns it off)."
        )
    return int(text)
