"""Reading field annotations and values as source code, without importing them.

`arrayfield.ArrayModule` decides at class creation which fields are arrays by
evaluating their annotations; the codemod has to make the same call from the
syntax alone, so it recognises the spellings people write for JAX, NumPy and
jaxtyping array types, reading `ast` nodes through `_syntax`.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Literal

from . import _syntax as syntax
from ._bindings import ImportMap
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


def _typing_form(expr: Any, imports: ImportMap) -> str | None:
    """`"Optional"` for `Optional`, `typing.Optional`, `t.Optional`..."""
    qualified = imports.resolve(expr)
    if qualified is None:
        return None
    module, _, name = qualified.rpartition(".")
    return name if module in _TYPING_MODULES else None


def _parse_string(expr: Any) -> Any | None:
    """The expression a string annotation spells, else None."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return syntax.parse_expression(expr.value.strip())
    return None


def alternatives(annotation: Any, imports: ImportMap) -> list[Any]:
    """The types an annotation allows, `None` left out.

    String annotations are parsed, and `Optional[...]`, `Union[...]`,
    `X | Y` and `Annotated[X, ...]` are unwrapped, so
    `"Optional[Float[Array, 'n']]"` gives `[Float[Array, 'n']]`.
    """
    parsed = _parse_string(annotation)  # one that does not parse is itself
    if parsed is not None:
        return alternatives(parsed, imports)
    if syntax.identifier(annotation) == "None":
        return []
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        left, right = annotation.left, annotation.right
        return alternatives(left, imports) + alternatives(right, imports)
    if isinstance(annotation, ast.Subscript):
        form = _typing_form(annotation.value, imports)
        items = syntax.subscript_items(annotation)
        if form in ("Optional", "Union"):
            return [alt for item in items for alt in alternatives(item, imports)]
        if items and (form == "Annotated" or is_field_wrapped(annotation, imports)):
            return alternatives(items[0], imports)
    return [annotation]


def is_field_wrapped(annotation: Any, imports: ImportMap) -> bool:
    """Whether an annotation is `af.Field[...]` (the annotation inside, at runtime)."""
    return (
        isinstance(annotation, ast.Subscript)
        and imports.resolve(annotation.value) == "arrayfield.Field"
    )


def _array_type_kind(expr: Any, imports: ImportMap) -> ArrayKind | None:
    if isinstance(expr, ast.Subscript):
        dtype_form = imports.resolve(expr.value)
        items = syntax.subscript_items(expr)
        if (
            dtype_form is None
            or not _JAXTYPING_DTYPE.fullmatch(dtype_form)
            or not items
        ):
            return None
        return _array_type_kind(items[0], imports)  # Float[Array, ...]: from Array
    return ARRAY_TYPES.get(imports.resolve(expr) or "")


def array_kind(annotation: Any, imports: ImportMap) -> ArrayKind | None:
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


def _names_numbers(member: Any, imports: ImportMap) -> bool:
    name = syntax.identifier(member)
    if name is not None and name not in imports.bindings:
        return name in _NUMBER_TYPES
    if isinstance(member, ast.Subscript):  # Float[ArrayLike, ""]
        items = syntax.subscript_items(member)
        return bool(items) and _names_numbers(items[0], imports)
    return (imports.resolve(member) or "") in _NAMES_NUMBERS


def scalar_annotation(
    annotation: Any, imports: ImportMap, types: tuple[str, ...] = ()
) -> str | None:
    """`"float"` or `"complex"` (or one of `types`, e.g. `"int"`, `"str"`) when
    that builtin is all the annotation allows."""
    members = alternatives(annotation, imports)
    name = syntax.identifier(members[0]) if len(members) == 1 else None
    if name in ("float", "complex", *types) and name not in imports.bindings:
        return name
    return None


def is_class_var(annotation: Any, imports: ImportMap) -> bool:
    """ClassVar and InitVar annotations do not declare instance fields."""
    target = _parse_string(annotation) or annotation
    if isinstance(target, ast.Subscript):
        target = target.value
    qualified = imports.resolve(target) or ""
    return qualified in (
        "typing.ClassVar",
        "typing_extensions.ClassVar",
        "dataclasses.InitVar",
    )


def _is_int_like(expr: Any) -> bool:
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return True
    if isinstance(expr, ast.UnaryOp):
        return isinstance(expr.op, ast.USub) and _is_int_like(expr.operand)
    name = syntax.identifier(expr)
    if name is not None:
        return name not in ("True", "False", "None")
    if isinstance(expr, ast.Attribute):
        return True
    if isinstance(expr, ast.Subscript):
        return looks_like_shape(expr.value)
    if isinstance(expr, ast.Call):
        return dotted_name(expr.func) in ("len", "int")
    return False


def looks_like_shape(expr: Any) -> bool:
    """Whether a value reads like a shape or index list rather than data.

    Matches non-empty list/tuple displays of integers and names (`[1, 2]`,
    `(n, n)`), `x.shape`, slices of it and `tuple(x.shape)`. A display with a
    float literal in it is data.
    """
    elements = syntax.display_elements(expr)
    if elements is not None:
        if not elements:
            return False
        return all(
            looks_like_shape(value) if starred else _is_int_like(value)
            for starred, value in elements
        )
    if isinstance(expr, ast.Attribute):
        return expr.attr == "shape"
    if isinstance(expr, ast.Subscript):
        return looks_like_shape(expr.value)
    if isinstance(expr, ast.Call) and dotted_name(expr.func) in ("tuple", "list"):
        arguments = syntax.call_arguments(expr)
        return len(arguments) == 1 and looks_like_shape(
            syntax.argument_value(arguments[0])
        )
    return False
