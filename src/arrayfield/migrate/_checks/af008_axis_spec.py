"""AF008: a Module class built as a `vmap` axis spec (`in_axes=Pwc(None, 0)`).
As an `af.ArrayModule` it stores the axis `0` given to an array field as an
int32 array, which `jax.vmap` refuses; nothing at run time tells an axis from
data, so the codemod says it where it sees the call."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from .. import _syntax as syntax
from .._diagnostics import Diagnostic
from .._syntax import dotted_name

if TYPE_CHECKING:
    from .._read import AstAnalysis

CODE = "AF008"
SUMMARY = (
    "a Module class the codemod migrates built as a vmap axis spec "
    "(in_axes=Cls(None, 0)): as an af.ArrayModule it stores the int axis as "
    "an array, which jax.vmap refuses; build the spec with eqx.tree_at"
)
# The keywords of jax.vmap, jax.pmap, eqx.filter_vmap... that take axis specs.
AXIS_KEYWORDS = ("in_axes", "out_axes")
NEEDLES = ("_axes",)


def calls_in(expr: Any) -> list[Any]:
    """The calls in an axis spec: the spec, or those in a tuple or list of specs."""
    if isinstance(expr, ast.Call):
        return [expr]
    if not isinstance(expr, ast.Tuple | ast.List):
        return []
    return [
        call
        for element in expr.elts
        for call in calls_in(syntax.argument_value(element))
    ]


def _gives_an_axis(spec: Any) -> bool:
    """Whether a call passes an int literal (`0`, `-1`): an axis, which an array
    field stores as an array (`None` stays `None`)."""
    arguments = [*spec.args, *spec.keywords]
    return any(syntax.number_type(syntax.argument_value(a)) is int for a in arguments)


def check_call(node: Any, known: AstAnalysis) -> list[Diagnostic]:
    """For each call of a Module class this run migrates that passes an axis,
    in an axis keyword of the call."""
    found = []
    for keyword in [kw for kw in node.keywords if kw.arg in AXIS_KEYWORDS]:
        for spec in calls_in(keyword.value):
            name = dotted_name(spec.func)
            if not (known.migrated_class(name) and _gives_an_axis(spec)):
                continue
            message = (
                f"{name}(...) is built as an axis spec ({keyword.arg}=): as an "
                f"af.ArrayModule, {name} stores an int axis given to an "
                "array-annotated field as an int32 array, and jax.vmap refuses the "
                "spec. Build it without __init__: eqx.tree_at(lambda s: s.<field>, "
                f"{name}(None, ...), 0, is_leaf=lambda x: x is None) puts the Python "
                "int in place."
            )
            found.append(Diagnostic(*known.position(spec), CODE, message))
    return found
