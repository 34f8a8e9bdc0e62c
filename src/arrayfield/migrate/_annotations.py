"""Reading field annotations and values as source code, without importing them.

`arrayfield.ArrayModule` decides at class creation which fields are arrays by
evaluating their annotations; the codemod has to make the same call from the
syntax alone, so it recognises the spellings people write for JAX, NumPy and
jaxtyping array types.
"""

from __future__ import annotations

import re
from typing import Literal

import libcst as cst

from ._imports import ImportMap
from ._names import dotted_name

ArrayKind = Literal["jax", "numpy"]

# Annotations arrayfield converts to, by the kind of array a value becomes.
ARRAY_TYPES: dict[str, ArrayKind] = {
    "jax.Array": "jax",
    "jax.numpy.ndarray": "jax",
    "jax.typing.ArrayLike": "jax",
    "jaxtyping.Array": "jax",
    "jaxtyping.ArrayLike": "jax",
    "numpy.ndarray": "numpy",
    # Functions, not types, but older code annotates with them.
    "jax.numpy.array": "jax",
    "numpy.array": "numpy",
}

# A union that names a Python number type admits Python numbers as they are:
# arrayfield stores them unchanged. `ArrayLike` names them all.
_NUMBER_TYPES = frozenset({"bool", "int", "float", "complex"})
_NAMES_NUMBERS = frozenset({"jax.typing.ArrayLike", "jaxtyping.ArrayLike"})

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
        if is_field_wrapped(annotation, imports) and items:
            return alternatives(items[0], imports)
    return [annotation]


def is_field_wrapped(annotation: cst.BaseExpression, imports: ImportMap) -> bool:
    """Whether an annotation is `af.Field[...]` (the annotation inside, at runtime)."""
    return (
        isinstance(annotation, cst.Subscript)
        and imports.resolve(annotation.value) == "arrayfield.Field"
    )


def _array_type_kind(expr: cst.BaseExpression, imports: ImportMap) -> ArrayKind | None:
    if isinstance(expr, cst.Subscript):
        dtype_form = imports.resolve(expr.value)
        items = _subscript_items(expr)
        if (
            dtype_form is None
            or not _JAXTYPING_DTYPE.fullmatch(dtype_form)
            or not items
        ):
            return None
        return _array_type_kind(items[0], imports)  # Float[Array, ...]: from Array
    return ARRAY_TYPES.get(imports.resolve(expr) or "")


def array_kind(annotation: cst.BaseExpression, imports: ImportMap) -> ArrayKind | None:
    """What arrayfield turns Python numbers in a field with this annotation into.

    `"jax"` for `jax.Array`, `Float[Array, "n"]`, `Optional[jax.Array]`...,
    `"numpy"` for `np.ndarray` and `Float[np.ndarray, "n"]`, None for anything
    else. A union that names a Python number type (`Union[jax.Array, float]`,
    `ArrayLike`) keeps Python numbers as they are, so the answer is None; any
    other member, as in `Union[jax.Array, str]`, makes the field one for a
    human to look at, so the answer is None too.
    """
    kinds: set[ArrayKind] = set()
    for member in alternatives(annotation, imports):
        if _names_numbers(member, imports):
            return None
        kind = _array_type_kind(member, imports)
        if kind is None:
            return None
        kinds.add(kind)
    if not kinds:
        return None
    return "jax" if "jax" in kinds else "numpy"


def _names_numbers(member: cst.BaseExpression, imports: ImportMap) -> bool:
    if isinstance(member, cst.Name) and member.value not in imports.bindings:
        return member.value in _NUMBER_TYPES
    if isinstance(member, cst.Subscript):  # Float[ArrayLike, ""]
        items = _subscript_items(member)
        return bool(items) and _names_numbers(items[0], imports)
    return (imports.resolve(member) or "") in _NAMES_NUMBERS


def scalar_annotation(
    annotation: cst.BaseExpression, imports: ImportMap, types: tuple[str, ...] = ()
) -> str | None:
    """`"float"` or `"complex"` (or one of `types`, e.g. `"int"`, `"str"`) when
    that builtin is all the annotation allows."""
    members = alternatives(annotation, imports)
    if len(members) != 1 or not isinstance(members[0], cst.Name):
        return None
    name = members[0].value
    if name in ("float", "complex", *types) and name not in imports.bindings:
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
