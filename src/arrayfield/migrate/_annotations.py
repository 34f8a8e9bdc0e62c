"""Field annotations and values read as source, never run: the codemod decides
which fields are arrays, as `af.ArrayModule` does by evaluating annotations, from
the spellings people write for JAX, NumPy and jaxtyping array types."""

from __future__ import annotations

import ast
import re
from typing import Any, Literal

from . import _syntax as syntax
from ._bindings import ImportMap
from ._syntax import dotted_name

ArrayKind = Literal["jax", "numpy"]

# Annotations arrayfield converts to, by the kind of array a value becomes. Not
# `ArrayLike`: it admits Python numbers, which arrayfield stores unchanged.
ARRAY_TYPES: dict[str, ArrayKind] = {
    "jax.Array": "jax",
    "jax.numpy.ndarray": "jax",
    "jaxtyping.Array": "jax",
    "numpy.ndarray": "numpy",
    # Functions, not types, but older code annotates with them.
    "jax.numpy.array": "jax",
    "numpy.array": "numpy",
}

# jaxtyping's dtype-specific annotations: Float[...], Int32[...], Shaped[...] ...
_JAXTYPING_DTYPE = re.compile(
    r"jaxtyping\.(Shaped|Bool|Key|Num|Inexact|Float|BFloat|Complex|Integer|UInt|Int|Real)\d*"
)

_TYPING = ("typing.", "typing_extensions.")
# Subscripts that list the types a field allows, and those that wrap one.
_UNIONS = frozenset(
    typing + form for typing in _TYPING for form in ("Optional", "Union")
)
_WRAPPERS = frozenset(
    {"arrayfield.Field", *(typing + "Annotated" for typing in _TYPING)}
)
# Annotations that declare no instance field.
_CLASS_VARS = frozenset(
    {"dataclasses.InitVar", *(typing + "ClassVar" for typing in _TYPING)}
)


def _parse_string(expr: Any) -> Any | None:
    """The expression a string annotation spells, else None."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return syntax.parse_expression(expr.value.strip())
    return None


def alternatives(annotation: Any, imports: ImportMap) -> list[Any]:
    """The types an annotation allows, `None` left out: strings are parsed and
    `Optional`, `Union`, `X | Y`, `Annotated` and `af.Field` unwrapped, so
    `"Optional[Float[Array, 'n']]"` gives `[Float[Array, 'n']]`."""
    parsed = _parse_string(annotation)  # one that does not parse is itself
    if parsed is not None:
        return alternatives(parsed, imports)
    if syntax.identifier(annotation) == "None":
        return []
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        left, right = annotation.left, annotation.right
        return alternatives(left, imports) + alternatives(right, imports)
    if isinstance(annotation, ast.Subscript):
        form = imports.resolve(annotation.value)
        items = syntax.subscript_items(annotation)
        if form in _UNIONS:
            return [alt for item in items for alt in alternatives(item, imports)]
        if items and form in _WRAPPERS:
            return alternatives(items[0], imports)
    return [annotation]


def is_field_wrapped(annotation: Any, imports: ImportMap) -> bool:
    """Whether an annotation is `af.Field[...]` (the annotation inside, at runtime)."""
    return (
        isinstance(annotation, ast.Subscript)
        and imports.resolve(annotation.value) == "arrayfield.Field"
    )


def jaxtyping_dtype(annotation: Any, imports: ImportMap) -> str | None:
    """`Float` for `Float[Array, "n"]` or `Float32[...]` (any import spelling)."""
    if not isinstance(annotation, ast.Subscript):
        return None
    match = _JAXTYPING_DTYPE.fullmatch(imports.resolve(annotation.value) or "")
    return match[1] if match else None


def _array_type_kind(expr: Any, imports: ImportMap) -> ArrayKind | None:
    if not isinstance(expr, ast.Subscript):
        return ARRAY_TYPES.get(imports.resolve(expr) or "")
    items = syntax.subscript_items(expr)
    if jaxtyping_dtype(expr, imports) is None or not items:
        return None
    return _array_type_kind(items[0], imports)  # Float[Array, ...]: from Array


def array_kind(annotation: Any, imports: ImportMap) -> ArrayKind | None:
    """What arrayfield turns Python numbers in a field with this annotation into:
    `"jax"` for `jax.Array`, `Float[Array, "n"]`, `Optional[jax.Array]`...,
    `"numpy"` for `np.ndarray` and `Float[np.ndarray, "n"]`, else None. A union
    with a member that is no array type is None: with a Python number type
    (`Union[jax.Array, float]`) it keeps numbers as they are, and with another
    (`str`) it is for a human to look at.
    """
    kinds: set[ArrayKind] = set()
    for member in alternatives(annotation, imports):
        kind = _array_type_kind(member, imports)
        if kind is None:
            return None
        kinds.add(kind)
    if "jax" in kinds:
        return "jax"
    return "numpy" if kinds else None


def scalar_annotation(
    annotation: Any, imports: ImportMap, types: tuple[str, ...] = ()
) -> str | None:
    """`"float"`, `"complex"` or one of `types` when that builtin is all it allows."""
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
    return imports.resolve(target) in _CLASS_VARS


def _is_int_like(expr: Any) -> bool:
    """An item of a shape: an int, `-n`, a name, `len(...)`, `x.shape[0]`..."""
    if isinstance(expr, ast.Constant):
        return type(expr.value) is int
    if isinstance(expr, ast.UnaryOp):
        return isinstance(expr.op, ast.USub) and _is_int_like(expr.operand)
    if isinstance(expr, ast.Name | ast.Attribute):
        return True
    if isinstance(expr, ast.Subscript):
        return looks_like_shape(expr.value)
    if isinstance(expr, ast.Call):
        return dotted_name(expr.func) in ("len", "int")
    return False


def looks_like_shape(expr: Any) -> bool:
    """Whether a value reads like a shape or indices rather than data: `(n, 2)`
    (a float makes it data), `x.shape`, a slice of it, `tuple(x.shape)`."""
    if isinstance(expr, ast.Tuple | ast.List):
        return bool(expr.elts) and all(
            looks_like_shape(e.value) if isinstance(e, ast.Starred) else _is_int_like(e)
            for e in expr.elts
        )
    if isinstance(expr, ast.Attribute):
        return expr.attr == "shape"
    if isinstance(expr, ast.Subscript):
        return looks_like_shape(expr.value)
    if isinstance(expr, ast.Call) and dotted_name(expr.func) in ("tuple", "list"):
        arguments = [*expr.args, *expr.keywords]
        return len(arguments) == 1 and looks_like_shape(
            syntax.argument_value(arguments[0])
        )
    return False
