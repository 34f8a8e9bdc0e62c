"""arrayfield: annotation-driven array fields for equinox Modules.

`eqx.filter_jit` hashes every non-array leaf into its cache key, so a Module field
holding a Python number recompiles on every new value. `af.ArrayModule` reads each
field's annotation and stores scalars in array-annotated fields as strongly typed
arrays, so a `filter_jit` loop traces once.
"""

import importlib
from typing import TYPE_CHECKING, Any

from . import _hooks
from ._env import EXPLAIN_RETRACES, env_flag
from ._typing import Field as Field  # no JAX at runtime: `Field[T]` is `T`

# The public API: each name and the module that defines it. This table drives
# `__all__` and the lazy loader; tests/test_layout.py checks that the imports for
# type checkers below name exactly these. Names load when first used: the
# diagnostics are half of arrayfield's own import time, and a training script that
# never asks for a diagnosis should not pay for them; the core imports JAX, which
# the `arrayfield migrate` command never needs (filter_jit's module defines a
# Module class, ~10 ms, so it waits too).
_PUBLIC = {
    "AnnotationWarning": "._errors",
    "ArrayModule": "._module",
    "AuditError": "._errors",
    "CompatibilityWarning": "._errors",
    "CompileCount": "._compiles",
    "ConversionError": "._errors",
    "Exported": "._export",
    "ExportedFamily": "._export",
    "Field": "._typing",
    "Finding": ".diagnostics._findings",
    "Findings": ".diagnostics._findings",
    "RetraceNote": "._errors",
    "RetraceWarning": "._errors",
    "TraceReuseWarning": "._errors",
    "ValidationError": "._errors",
    "assert_clean": ".diagnostics._audit",
    "audit": ".diagnostics._audit",
    "count_compiles": "._compiles",
    "deserialize": "._export",
    "explain_retraces": ".diagnostics._retrace",
    "export": "._export",
    "export_family": "._export",
    "field": "._field",
    "filter_jit": "._jit",
    "normalize": "._normalize",
    "use_compile_cache": "._compile_cache",
}

if TYPE_CHECKING:
    from ._compile_cache import use_compile_cache as use_compile_cache
    from ._compiles import CompileCount as CompileCount
    from ._compiles import count_compiles as count_compiles
    from ._errors import AnnotationWarning as AnnotationWarning
    from ._errors import AuditError as AuditError
    from ._errors import CompatibilityWarning as CompatibilityWarning
    from ._errors import ConversionError as ConversionError
    from ._errors import RetraceNote as RetraceNote
    from ._errors import RetraceWarning as RetraceWarning
    from ._errors import TraceReuseWarning as TraceReuseWarning
    from ._errors import ValidationError as ValidationError
    from ._export import Exported as Exported
    from ._export import ExportedFamily as ExportedFamily
    from ._export import deserialize as deserialize
    from ._export import export as export
    from ._export import export_family as export_family
    from ._field import field as field
    from ._jit import filter_jit as filter_jit
    from ._normalize import normalize as normalize

    # A class statement mypy can read (see _typing.py); at runtime, _module's.
    from ._typing import ArrayModule as ArrayModule
    from .diagnostics._audit import assert_clean as assert_clean
    from .diagnostics._audit import audit as audit
    from .diagnostics._findings import Finding as Finding
    from .diagnostics._findings import Findings as Findings
    from .diagnostics._retrace import explain_retraces as explain_retraces

__version__ = "0.1.0"


def _explain_static_retraces(
    fn: Any, old: tuple, new: tuple, retraces: int, shares_numbers: bool
) -> None:
    # af.filter_jit's unasked warning (`_hooks`): the diagnostics load only here.
    from .diagnostics._unasked import warn_static_retraces

    warn_static_retraces(fn, old, new, retraces, shares_numbers)


_hooks.explain_static_retraces = _explain_static_retraces
# Type checkers read the `X as X` imports above; `__all__` serves `import *`.
__all__ = sorted(_PUBLIC)  # pyright: ignore[reportUnsupportedDunderAll]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'arrayfield' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, "__version__"])


if env_flag(EXPLAIN_RETRACES):  # watches the process from import on
    importlib.import_module(".diagnostics._retrace", __name__)
