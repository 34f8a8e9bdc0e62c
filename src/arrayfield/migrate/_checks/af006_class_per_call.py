"""AF006: a Module class made by `type(...)` each time a function runs.

Instances of different class objects never share a compilation, so every call
of such a function makes models that compile again.
"""

from __future__ import annotations

import libcst as cst

from .._diagnostics import Diagnostic
from .._names import dotted_name
from .._site import snippet

CODE = "AF006"


def message(name: str) -> str:
    return (
        f"Module class {name} is made with type(...) each time this function runs; "
        "instances of different class objects never share a compilation, so every "
        "call recompiles a jitted function that receives one. Make the class once: "
        "at module level, or in a factory decorated with functools.cache that "
        "takes its field names."
    )


def is_cache(decorator: cst.Decorator) -> bool:
    """`@functools.cache`, `@lru_cache(maxsize=None)` and the like."""
    expr = decorator.decorator
    if isinstance(expr, cst.Call):
        expr = expr.func
    return (dotted_name(expr) or "").rpartition(".")[2] in ("cache", "lru_cache")


def check(call: cst.Call, position: tuple[int, int]) -> Diagnostic:
    """For a `type(name, bases, namespace)` call, deriving a Module class, in a
    function that is not cached."""
    return Diagnostic(*position, CODE, message(snippet(call.args[0].value)))
