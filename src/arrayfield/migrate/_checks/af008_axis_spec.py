"""AF008: a Module class built as a `vmap` axis spec (`in_axes=Pwc(None, 0)`).

Some libraries build an instance of their own Module as an `in_axes` or
`out_axes` prefix tree. After migration the class is an `af.ArrayModule`: the
axis `0` given to an array-annotated field is stored as an int32 array, and
`jax.vmap` refuses the spec. Nothing at run time can tell an axis from data, so
the codemod says it where it can see the call.
"""

from __future__ import annotations

import ast
from typing import Any

from .. import _syntax as syntax
from .._diagnostics import Diagnostic
from .._names import dotted_name
from .._site import CallContext

CODE = "AF008"
# Its line in `arrayfield migrate --help`.
SUMMARY = (
    "a Module class the codemod migrates built as a vmap axis spec "
    "(in_axes=Cls(None, 0)): as an af.ArrayModule it stores the int axis as "
    "an array, which jax.vmap refuses; build the spec with eqx.tree_at"
)
# The keywords of jax.vmap, jax.pmap, eqx.filter_vmap... that take axis specs.
AXIS_KEYWORDS = ("in_axes", "out_axes")
# Text without which a file passes no axis spec.
NEEDLES = ("_axes",)


def message(name: str, keyword: str) -> str:
    return (
        f"{name}(...) is built as an axis spec ({keyword}=): as an af.ArrayModule, "
        f"{name} stores an int axis given to an array-annotated field as an int32 "
        "array, and jax.vmap refuses the spec. Build it without __init__: "
        f"eqx.tree_at(lambda s: s.<field>, {name}(None, ...), 0, "
        "is_leaf=lambda x: x is None) puts the Python int in place."
    )


def calls_in(expr: Any) -> list[Any]:
    """The calls in an axis spec: the spec itself, or the elements of a tuple or
    list of specs, at any depth."""
    if isinstance(expr, ast.Call):
        return [expr]
    elements = syntax.display_elements(expr) or []
    return [call for _, element in elements for call in calls_in(element)]


def gives_an_axis(call: Any) -> bool:
    """Whether a call passes an int literal (`0`, `-1`): an axis, which an
    array field would store as an array (`None` stays `None`)."""
    return any(
        syntax.number_type(syntax.argument_value(argument)) is int
        for argument in [*call.args, *call.keywords]
    )


def check_call(node: Any, known: CallContext) -> list[Diagnostic]:
    """For each call of a Module class this run migrates, passing an int, in
    an axis keyword of the call."""
    found = []
    keywords = syntax.call_keywords(node)
    for keyword in AXIS_KEYWORDS:
        argument = keywords.get(keyword)
        if argument is None:
            continue
        for spec in calls_in(syntax.argument_value(argument)):
            name = dotted_name(spec.func)
            if name is not None and known.migrated_class(name) and gives_an_axis(spec):
                position = known.position(spec)
                found.append(Diagnostic(*position, CODE, message(name, keyword)))
    return found
