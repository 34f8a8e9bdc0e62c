"""Reading field annotations and values as source code, without importing them.

`arrayfield.ArrayModule` decides at class creation which fields are arrays by
evaluating their annotations; the codemod has to make the same call from the
syntax alone, so it recognises the spellings people write for JAX, NumPy and
jaxtyping array types.
"""

from __future__ import annotations

import re

import libcst as cst

from ._imports import ImportMap, dotted_name

ARRAY_TYPES = frozenset(
    {
        "jax.Array",
        "jax.numpy.ndarray",
        "jax.typing.ArrayLike",
        "jaxtyping.Array",
        "jaxtyping.ArrayLike",
        "numpy.ndarray",
        # Functions, not types, but older code annotates with them.
        "jax.numpy.array",
        "numpy.array",
    }
)

# jaxtyping's dtype-specific annotations: Float[...], Int32[...], Shaped[...] ...
_JAXTYPING_DTYPE = re.compile(
    r"jaxtyping\.(Shaped|Bool|Key|Num|Inexact|Float|BFloat|Complex|Integer|UInt|Int|Real)\d*"
)

_TYPING_MODULES = ("typing", "typing_extensions")


def _typing_form(expr: cst.BaseExpression, imports: ImportMap) -> str | None:
    """`"Optional"` for `Optional`, `typing.Optional`, `t.Optional`..."""
    qualified = imports.resolve(expr)
    if qualified is None:
        return None
    module, _, name = qualified.rpartition(".")
    return name if module in _TYPING_MODULES else None


def _subscript_items(node: cst.Subscript) -> list[cst.BaseExpression]:
    return [
        element.slice.value
        for element in node.slice
        if isinstance(element.slice, cst.Index)
    ]


def _parse_string(expr: cst.SimpleString) -> cst.BaseExpression | None:
    value = expr.evaluated_value
    if not isinstance(value, str):
        return None
    try:
        return cst.parse_expression(value.strip())
    except cst.ParserSyntaxError:
        return None


def alternatives(
    annotation: cst.BaseExpression, imports: ImportMap
) -> list[cst.BaseExpression]:
    """The types an annotation allows, `None` left out.

    String annotations are parsed, and `Optional[...]`, `Union[...]`,
    `X | Y` and `Annotated[X, ...]` are unwrapped, so
    `"Optional[Float[Array, 'n']]"` gives `[Float[Array, 'n']]`.
    """
    if isinstance(annotation, cst.SimpleString):
        parsed = _parse_string(annotation)
        return [annotation] if parsed is None else alternatives(parsed, imports)
    if isinstance(annotation, cst.Name) and annotation.value == "None":
        return []
    if isinstance(annotation, cst.BinaryOperation) and isinstance(
        annotation.operator, cst.BitOr
    ):
        return alternatives(annotation.left, imports) + alternatives(
            annotation.right, imports
        )
    if isinstance(annotation, cst.Subscript):
        form = _typing_form(annotation.value, imports)
        items = _subscript_items(annotation)
        if form in ("Optional", "Union"):
            return [alt for item in items for alt in alternatives(item, imports)]
        if form == "Annotated" and items:
            return alternatives(items[0], imports)
    return [annotation]


def is_array_type(expr: cst.BaseExpression, imports: ImportMap) -> bool:
    if isinstance(expr, cst.Subscript):
        qualified = imports.resolve(expr.value)
        return qualified is not None and bool(_JAXTYPING_DTYPE.fullmatch(qualified))
    return imports.resolve(expr) in ARRAY_TYPES


def is_array_annotation(annotation: cst.BaseExpression, imports: ImportMap) -> bool:
    """Whether every type the annotation allows (besides None) is an array type.

    `Union[jax.Array, float]` is not: a field that may hold a Python float on
    purpose is left for a human.
    """
    types = alternatives(annotation, imports)
    return bool(types) and all(is_array_type(t, imports) for t in types)


def scalar_annotation(annotation: cst.BaseExpression, imports: ImportMap) -> str | None:
    """`"float"` or `"complex"` when that builtin is all the annotation allows."""
    types = alternatives(annotation, imports)
    if len(types) != 1 or not isinstance(types[0], cst.Name):
        return None
    name = types[0].value
    if name in ("float", "complex") and name not in imports.bindings:
        return name
    return None


def is_class_var(annotation: cst.BaseExpression, imports: ImportMap) -> bool:
    """ClassVar and InitVar annotations do not declare instance fields."""
    target = annotation
    if isinstance(target, cst.SimpleString):
        target = _parse_string(target) or target
    if isinstance(target, cst.Subscript):
        target = target.value
    qualified = imports.resolve(target) or ""
    return qualified in (
        "typing.ClassVar",
        "typing_extensions.ClassVar",
        "dataclasses.InitVar",
    )


def _is_int_like(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Integer):
        return True
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return _is_int_like(expr.expression)
    if isinstance(expr, cst.Name):
        return expr.value not in ("True", "False", "None")
    if isinstance(expr, cst.Attribute):
        return True
    if isinstance(expr, cst.Subscript):
        return looks_like_shape(expr.value)
    if isinstance(expr, cst.Call):
        return dotted_name(expr.func) in ("len", "int")
    return False


def looks_like_shape(expr: cst.BaseExpression) -> bool:
    """Whether a value reads like a shape or index list rather than data.

    Matches non-empty list/tuple displays of integers and names (`[1, 2]`,
    `(n, n)`), `x.shape`, slices of it and `tuple(x.shape)`. A display with a
    float literal in it is data.
    """
    if isinstance(expr, (cst.Tuple, cst.List)):
        if not expr.elements:
            return False
        return all(
            looks_like_shape(element.value)
            if isinstance(element, cst.StarredElement)
            else _is_int_like(element.value)
            for element in expr.elements
        )
    if isinstance(expr, cst.Attribute):
        return expr.attr.value == "shape"
    if isinstance(expr, cst.Subscript):
        return looks_like_shape(expr.value)
    if isinstance(expr, cst.Call) and dotted_name(expr.func) in ("tuple", "list"):
        return len(expr.args) == 1 and looks_like_shape(expr.args[0].value)
    return False
