"""Switches read from the environment, spelled one way for every feature."""

import os

# The switches, documented in the README: validation of new ArrayModule classes,
# and explaining every retrace in the process.
CHECK = "ARRAYFIELD_CHECK"
EXPLAIN_RETRACES = "ARRAYFIELD_EXPLAIN_RETRACES"

_OFF = ("", "0", "false", "no", "off")


def env_flag(name: str) -> bool:
    """Whether the environment variable `name` is set to something other than off.

    `1`, `true`, `yes`, `on` (any case) switch a feature on; unset, empty, `0`,
    `false`, `no` and `off` leave it off.
    """
    return os.environ.get(name, "").strip().lower() not in _OFF
