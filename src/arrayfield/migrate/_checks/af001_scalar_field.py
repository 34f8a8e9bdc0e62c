"""AF001: a field annotated with a Python number type that gets new values.

Each new float in a non-static field is a new static part of the model, so a
jitted function that receives the model compiles again; an array annotation
makes arrayfield store it as a traced array instead.
"""

from __future__ import annotations

from collections.abc import Mapping

from .. import _syntax as syntax
from .._annotations import scalar_annotation
from .._diagnostics import Diagnostic
from .._facts import CONTROL, PARAM, SHAPE
from .._site import FieldReading, FieldSite

CODE = "AF001"
# Its line in `arrayfield migrate --help`.
SUMMARY = (
    "non-static field annotated float/complex (or an int that eqx.tree_at "
    "replaces) without an array converter and not used in control flow or as a "
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


def message(
    cls: str,
    field: str,
    type_name: str,
    evidence: str = "",
    f722: bool = False,
    tree_at: bool = False,
) -> str:
    """`evidence` says where the field gets new values, e.g. "it is replaced
    with eqx.tree_at at fit.py:12", or is empty; `f722` adds `F722_NOTE`;
    `tree_at`: `eqx.tree_at` replaces it, so static=True, whose field is no
    leaf, would make that call raise: not advised."""
    jaxtyping_name = _JAXTYPING_NAMES.get(type_name, "Float")
    because = f" ({evidence})" if evidence else ""
    otherwise = (
        " (not static=True: eqx.tree_at cannot replace a static field, which is "
        "no leaf)"
        if tree_at
        else ", or declare it static=True if it is configuration"
    )
    return (
        f"field '{cls}.{field}' is annotated `{type_name}`; every new value "
        f"recompiles a jitted function that receives the model{because}. "
        f'Annotate it `{field}: {jaxtyping_name}[Array, ""]` so arrayfield turns '
        f"it into a traced array{otherwise}." + (F722_NOTE if f722 else "")
    )


def constant_message(cls: str, field: str, type_name: str, value: str) -> str:
    """For a field that keeps its numeric default (`ClassContext.constants`):
    what keeps it a constant first, and the array only for a parameter to fit
    (an optimizer trains a floating array)."""
    jaxtyping_name = _JAXTYPING_NAMES.get(type_name, "Float")
    return (
        f"field '{cls}.{field}' is annotated `{type_name}` and defaults to "
        f"`{value}`, and nothing in the project passes it, assigns it, replaces "
        "it or eqx.tree_at's it: a constant, which compiles once as it is. "
        f"Declare it `{field}: {type_name} = af.field(static=True, "
        f"default={value})` to say it is configuration (af.ArrayModule keeps a "
        f"`{type_name}` a Python number either way). Annotate it "
        f'`{jaxtyping_name}[Array, ""]` only if it is a parameter to fit: the '
        "optimizer then trains it."
    )


def check_field(
    site: FieldSite, reading: FieldReading, found: Mapping[str, Diagnostic]
) -> Diagnostic | None:
    """For a field that is no array, not static, without an array converter."""
    if not reading.python_leaf:
        return None
    scalar = scalar_annotation(site.annotation, site.imports, ("int",))
    if scalar is None:
        return None
    uses = site.uses()
    if SHAPE in uses or CONTROL in uses:
        return None  # a size or a flag: it must stay a Python number
    default = site.default
    if (
        site.context is not None
        and site.name in site.context.constants
        and default is not None
        and syntax.number_type(default) is not None
    ):
        text = constant_message(site.cls, site.name, scalar, site.snippet(default))
        return site.report(CODE, text)
    evidence = ""
    replaced = site.file.tree_at.get(site.name) if site.file else None
    assigned = site.assigns().get(PARAM)
    if replaced is not None:
        evidence = f"it is replaced with eqx.tree_at at {replaced}"
    elif assigned is not None:
        evidence = f"it is set from an `__init__` argument at {assigned}"
    elif site.context is not None and site.context.init_from_args:
        evidence = "it is set from a constructor argument"
    if scalar == "int" and replaced is None:
        return None  # ints are mostly sizes, counts and ids
    lint = site.file.lint if site.file else None
    f722 = lint is not None and lint.found and not lint.ignores_f722
    text = message(site.cls, site.name, scalar, evidence, f722, replaced is not None)
    return site.report(CODE, text)
