"""Callbacks a lower floor fires and a higher floor provides, so that no import
points up: the caller needs only the hook, never the module behind it."""

from collections.abc import Callable
from typing import Any

# Explains af.filter_jit's warning about a function that keeps tracing because
# Python numbers among its arguments change: `(fn, old (args, kwargs), new (args,
# kwargs), retraces, whether fn shares programs that differ only in numbers)`.
# Set by `arrayfield/__init__.py`, which loads the diagnostics only when it fires.
explain_static_retraces: Callable[[Any, tuple, tuple, int, bool], None] | None = None
