"""AF006: a Module class made by `type(...)` each time a function runs.

Instances of different class objects never share a compilation, so every call
of such a function makes models that compile again.
"""

from __future__ import annotations

from typing import Any

from .. import _syntax as syntax
from .._diagnostics import Diagnostic
from .._names import dotted_name

CODE = "AF006"
# Its line in `arrayfield migrate --help`.
SUMMARY = (
    "Module class made by type(...) inside a function: each call makes a "
    "new class, so each new instance recompiles; make the class once"
)


def message(name: str) -> str:
    return (
        f"Module class {name} is made with type(...) each time this function runs; "
        "instances of different class objects never share a compilation, so every "
        "call recompiles a jitted function that receives one. Make the class once: "
        "at module level, or in a factory decorated with functools.cache that "
        "takes its field names."
    )


def is_cache(expr: Any) -> bool:
    """`@functools.cache`, `@lru_cache(maxsize=None)` and the like: a
    decorator's expression."""
    if syntax.is_call(expr):
        expr = expr.func
    return (dotted_name(expr) or "").rpartition(".")[2] in ("cache", "lru_cache")


def check(name: str, position: tuple[int, int]) -> Diagnostic:
    """For a `type(name, bases, namespace)` call, deriving a Module class, in a
    function that is not cached; `name` is the source of its first argument."""
    return Diagnostic(*position, CODE, message(name))
