"""AF006: a Module class made by `type(...)` each time a function runs:
instances of different class objects never share a compilation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import _syntax as syntax
from .._diagnostics import Diagnostic

if TYPE_CHECKING:
    from .._read import AstAnalysis

CODE = "AF006"
NEEDLES = ("type(",)
SUMMARY = (
    "Module class made by type(...) inside a function: each call makes a "
    "new class, so each new instance recompiles; make the class once"
)


def check_call(node: Any, known: AstAnalysis) -> list[Diagnostic]:
    """For `type(name, (Module, ...), namespace)` in a function not cached."""
    made = syntax.class_made_by_type(node)
    if made is None or known.cached_function is not False:
        return []
    name, bases = made
    if not any(map(known.module_base, bases)):
        return []
    message = (
        f"Module class {known.snippet(name)} is made with type(...) each time this "
        "function runs; instances of different class objects never share a "
        "compilation, so every call recompiles a jitted function that receives "
        "one. Make the class once: at module level, or in a factory decorated "
        "with functools.cache that takes its field names."
    )
    return [Diagnostic(*known.position(node), CODE, message)]
