"""AF009: a class whose base migrate cannot resolve, because the module it is
imported from binds it at run time (`globals().update`, a lazy `__getattr__`)
or does not bind it where its text can be read. Whether the class is a Module
cannot be told, so it is neither rewritten nor checked: said once per file
and base, rather than passed over in silence."""

from __future__ import annotations

from .._diagnostics import Diagnostic

CODE = "AF009"
SUMMARY = (
    "cannot tell whether a class derives from eqx.Module: its base is bound at "
    "run time (a dynamic re-export) or nowhere migrate can read; the class is "
    "left as it is"
)


def diagnostics(unresolved: tuple[tuple[int, str, str], ...]) -> list[Diagnostic]:
    """One diagnostic per base as written, at the first class using it."""
    found: dict[str, Diagnostic] = {}
    for line, base, why in unresolved:
        if base not in found:
            message = (
                f"cannot tell whether '{base}' derives from eqx.Module: {why}. Its "
                "subclasses here are left unchecked; import it from the module "
                "that defines it to have them checked and migrated."
            )
            found[base] = Diagnostic(line, 1, CODE, message)
    return list(found.values())
