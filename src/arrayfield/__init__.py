"""arrayfield: annotation-driven array fields for equinox Modules.

`eqx.filter_jit` hashes every non-array leaf into its cache key, so a Module field
holding a Python number recompiles on every new value. `af.ArrayModule` reads each
field's annotation and stores scalars in array-annotated fields as strongly typed
arrays, so a `filter_jit` loop traces once.
"""

import importlib
from typing import TYPE_CHECKING, Any

from ._env import EXPLAIN_RETRACES, env_flag
from ._typing import Field as Field  # no JAX at runtime: `Field[T]` is `T`

if TYPE_CHECKING:  # imported on first use, below
    from ._audit import AuditError as AuditError
    from ._audit import Finding as Finding
    from ._audit import Findings as Findings
    from ._audit import assert_clean as assert_clean
    from ._audit import audit as audit
    from ._errors import AnnotationWarning as AnnotationWarning
    from ._errors import ConversionError as ConversionError
    from ._jit import filter_jit as filter_jit
    from ._module import field as field
    from ._module import normalize as normalize
    from ._retrace import RetraceWarning as RetraceWarning
    from ._retrace import TraceReuseWarning as TraceReuseWarning
    from ._retrace import explain_retraces as explain_retraces

    # A class statement mypy can read (see _typing.py); at runtime, _module's.
    from ._typing import ArrayModule as ArrayModule
    from ._validate import ValidationError as ValidationError

__version__ = "0.1.0"

# Loaded when first used: the diagnostics are half of arrayfield's own import
# time, and a training script that never asks for a diagnosis should not pay for
# them; the core imports JAX, which the `arrayfield migrate` command never needs
# (filter_jit's module defines a Module class, ~10 ms, so it waits too).
_LAZY = {
    "filter_jit": "._jit",
    "AnnotationWarning": "._errors",
    "ConversionError": "._errors",
    "ArrayModule": "._module",
    "field": "._module",
    "normalize": "._module",
    "ValidationError": "._validate",
    "AuditError": "._audit",
    "Finding": "._audit",
    "Findings": "._audit",
    "assert_clean": "._audit",
    "audit": "._audit",
    "RetraceWarning": "._retrace",
    "TraceReuseWarning": "._retrace",
    "explain_retraces": "._retrace",
}

__all__ = [
    "AnnotationWarning",
    "ArrayModule",
    "AuditError",
    "ConversionError",
    "Field",
    "Finding",
    "Findings",
    "RetraceWarning",
    "TraceReuseWarning",
    "ValidationError",
    "assert_clean",
    "audit",
    "explain_retraces",
    "field",
    "filter_jit",
    "normalize",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'arrayfield' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, "__version__"])


if env_flag(EXPLAIN_RETRACES):  # watches the process from import on
    importlib.import_module("._retrace", __name__)
