"""AF001: a field annotated with a Python number type that gets new values.
Each new value of a non-static number field recompiles a jitted function that
receives the model; an array annotation makes it a traced array instead."""

from __future__ import annotations

from collections.abc import Mapping

from .. import _syntax as syntax
from .._annotations import scalar_annotation
from .._diagnostics import Diagnostic
from .._facts import BUILT, CONTROL, PARAM, SHAPE
from .._site import FieldSite

CODE = "AF001"
SUMMARY = (
    "non-static field annotated float/complex (or an int that eqx.tree_at "
    "replaces) without an array converter, not made an array by its class's own "
    "code (`self.x = jnp.asarray(x)`) and not used in control flow or as a "
    'size: use Float[Array, ""] (or Complex/Int[Array, ""]) so a new value does '
    "not recompile; a number default nothing in the project sets is a "
    "constant: static=True first"
)

_JAXTYPING_NAMES = {"complex": "Complex", "int": "Int"}

# Ruff and pyflakes read the string of `Float[Array, ""]` as a forward reference.
F722_NOTE = (
    " Your lint configuration does not ignore F722, which ruff and flake8 report "
    'for the "" of that annotation (a jaxtyping shape, not a forward '
    'reference): add "F722" to the ignore list of [tool.ruff.lint] (or of '
    "flake8), as jaxtyping's documentation advises."
)


def check_field(site: FieldSite, found: Mapping[str, Diagnostic]) -> Diagnostic | None:
    if not site.python_leaf:
        return None
    scalar = scalar_annotation(site.annotation, site.imports, ("int",))
    uses = site.uses()
    if scalar is None or SHAPE in uses or CONTROL in uses:
        return None  # a size or a flag must stay a Python number
    if BUILT in site.assigns():
        # The class stores an array it builds itself (`self.x = jnp.asarray(x)`):
        # the annotation is loose, but no new value of it recompiles.
        return None
    array = f'{_JAXTYPING_NAMES.get(scalar, "Float")}[Array, ""]'
    default = site.default
    constants = site.context.constants if site.context else ()
    if site.name in constants and syntax.number_type(default) is not None:
        value = site.snippet(default)
        return site.report(
            CODE,
            f"is annotated `{scalar}` and defaults to `{value}`, and nothing in the "
            "project passes it, assigns it, replaces it or eqx.tree_at's it: a "
            "constant, which compiles once as it is. Declare it `"
            f"{site.name}: {scalar} = af.field(static=True, default={value})` to "
            f"say it is configuration (af.ArrayModule keeps a `{scalar}` a Python "
            f"number either way). Annotate it `{array}` only if it is a parameter "
            "to fit: the optimizer then trains it.",
        )
    replaced = site.file.tree_at.get(site.name) if site.file else None
    if scalar == "int" and replaced is None:
        return None  # ints are mostly sizes, counts and ids
    assigned = site.assigns().get(PARAM)
    otherwise = ", or declare it static=True if it is configuration"
    evidence = ""
    if replaced is not None:
        evidence = f" (it is replaced with eqx.tree_at at {replaced})"
        # static=True, whose field is no leaf, would make that eqx.tree_at raise.
        otherwise = (
            " (not static=True: eqx.tree_at cannot replace a static field, which "
            "is no leaf)"
        )
    elif assigned is not None:
        evidence = f" (it is set from an `__init__` argument at {assigned})"
    elif site.context is not None and site.context.init_from_args:
        evidence = " (it is set from a constructor argument)"
    lint = site.file.lint if site.file else None
    f722 = lint is not None and lint.found and not lint.ignores_f722
    return site.report(
        CODE,
        f"is annotated `{scalar}`; every new value recompiles a jitted function "
        f"that receives the model{evidence}. Annotate it `{site.name}: {array}` "
        f"so arrayfield turns it into a traced array{otherwise}."
        + (F722_NOTE if f722 else ""),
    )
