"""Opt-in validation of stored arrays against their jaxtyping annotations.

jaxtyping's runtime checks see `__init__` arguments, never what is stored after
conversion, so a `Float[Array, "3"]` field could hold shape `()` unnoticed. With
`class M(af.ArrayModule, check=True)` (or `ARRAYFIELD_CHECK=1` in the environment
when the class is defined), every array field of every new instance is checked
against its annotation after conversion, and so is every array in a container
field (`list[Float[Array, "n"]]`, `dict[str, ...]`, `PyTree[...]`): dtype
category, shape, and named dimensions shared across the fields of one instance.
The checking itself is jaxtyping's: `isinstance(value, Float[Array, "n"])` inside
one `jaxtyped` context, so dimension names bind across fields (and the elements of
a container) exactly as they do across function arguments. A value that is not an
array fails as well, unless the annotation admits it or it stands in for an array
(`_stands_in_for_an_array`); docs/rules.md lists which.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import jax
import jax.tree_util as jtu
import jaxtyping
import numpy as np

from ._declare import field_converters
from ._env import CHECK, env_flag
from ._errors import (
    ValidationError,
    class_name,
    format_annotation,
    short_repr,
    value_repr,
)
from ._facts import is_module
from ._spec import ArraySpec, FieldSpec, array_types

ENV_VAR = CHECK


def enabled_by_environment() -> bool:
    """Whether `ARRAYFIELD_CHECK` asks for validation of newly defined classes."""
    return env_flag(ENV_VAR)


@dataclasses.dataclass(frozen=True)
class _Check:
    """What one stored array (a field, or an element of one) is checked against."""

    annotation: Any  # resolved, for the message
    types: tuple[type, ...]  # what isinstance must accept (union members)
    allow_none: bool
    passthrough: tuple[type, ...]  # the union's other members: stored as they are
    # `types` as JAX arrays can hold them without x64 (`_as_stored_without_x64`)
    types_x32: tuple[type, ...] = ()

    def accepted(self) -> tuple[type, ...]:
        return self.types if _x64() else self.types_x32


@dataclasses.dataclass(frozen=True)
class _ContainerCheck:
    """A container field: the checks of its elements, laid out as in its spec."""

    container: str  # "list", "tuple", "dict" or "pytree"
    elements: tuple[_Check | _ContainerCheck, ...]
    fixed: bool  # one check per position (`tuple[X, Y]`)


# What a 64-bit dtype is stored as without `jax_enable_x64` (JAX's canonical dtypes).
_WITHOUT_X64 = {
    "float64": "float32",
    "int64": "int32",
    "uint64": "uint32",
    "complex128": "complex64",
}


def _x64() -> bool:
    return bool(jax.config.jax_enable_x64)  # pyright: ignore[reportAttributeAccessIssue]


def _as_stored_without_x64(member: type) -> type:
    """A JAX array annotation that also admits the 32-bit dtypes JAX stores
    without x64 for the 64-bit ones it names (`Float64[Array, ""]` admits float32).

    Conversion stores what JAX can hold, so validation accepts what conversion
    stores: a `Float64` field without x64 holds float32, as `jnp.asarray` would.
    """
    if not (
        isinstance(member, type)
        and issubclass(member, jaxtyping.AbstractArray)
        and member.array_type is jax.Array  # type: ignore[attr-defined]
    ):
        return member
    dtypes = member.dtypes  # type: ignore[attr-defined]
    if not isinstance(dtypes, (tuple, list)):
        return member
    narrowed = [_WITHOUT_X64[d] for d in dtypes if d in _WITHOUT_X64]
    if all(n in dtypes for n in narrowed):
        return member
    widened = list(dict.fromkeys([*dtypes, *narrowed]))
    # jaxtyping's documented way to define a dtype category: subclass AbstractDtype.
    category = type("Category", (jaxtyping.AbstractDtype,), {"dtypes": widened})
    return category[jax.Array, member.dim_str]  # type: ignore[attr-defined]


def _check_for(spec: FieldSpec, annotation: Any) -> _Check | _ContainerCheck:
    if isinstance(spec, ArraySpec):
        types = array_types(annotation)
        types_x32 = tuple(_as_stored_without_x64(t) for t in types)
        return _Check(annotation, types, spec.allow_none, spec.passthrough, types_x32)
    elements = tuple(
        _check_for(element, element_annotation)
        for element, element_annotation in zip(
            spec.elements, spec.annotations, strict=True
        )
    )
    return _ContainerCheck(spec.container, elements, spec.fixed)


# Weak keys: classes made on the fly (in tests, in loops) must stay collectable.
_fields_cache: weakref.WeakKeyDictionary[
    type, tuple[tuple[str, _Check | _ContainerCheck], ...]
] = weakref.WeakKeyDictionary()
_fields_lock = threading.Lock()


def _checked_fields(cls: type) -> tuple[tuple[str, _Check | _ContainerCheck], ...]:
    """The array and container fields of `cls` and their checks; once per class."""
    try:
        return _fields_cache[cls]
    except KeyError:
        pass
    found = []
    for name, converter in field_converters(cls).items():
        spec = converter.resolved_spec()
        if spec is not None:
            found.append((name, _check_for(spec, converter.resolved)))
    with _fields_lock:
        return _fields_cache.setdefault(cls, tuple(found))


def _stored_arrays(
    value: Any, check: _Check | _ContainerCheck, where: str
) -> Iterator[tuple[str, _Check, Any]]:
    """`(where, check, value)` for a field's value, or for each of its elements
    (`where` names the element: `sources[1]`, `params['w']`)."""
    if isinstance(check, _Check):
        yield where, check, value
    elif value is None:
        return  # stored as it is in any container field
    elif check.container == "pytree":
        paths = jtu.tree_flatten_with_path(value, is_leaf=is_module)[0]
        for path, leaf in paths:
            yield from _stored_arrays(leaf, check.elements[0], where + jtu.keystr(path))
    elif check.container == "dict":
        for key, element in value.items():
            yield from _stored_arrays(element, check.elements[0], f"{where}[{key!r}]")
    else:
        checks = check.elements if check.fixed else check.elements * len(value)
        for i, (element, element_check) in enumerate(zip(value, checks, strict=True)):
            yield from _stored_arrays(element, element_check, f"{where}[{i}]")


def _is_checkable(value: Any) -> bool:
    return isinstance(value, (jax.Array, np.ndarray))


def _stands_in_for_an_array(value: Any) -> bool:
    """A value that takes an array's place on purpose, and is stored unchecked.

    `jax.ShapeDtypeStruct`, and pytrees that describe themselves with `.shape` and
    `.dtype` as arrays do: equinox's loop buffers, quax-style array values.
    (Tracers are `jax.Array`s, checked as arrays.)
    """
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _matches(value: Any, types: tuple[type, ...]) -> bool:
    return any(isinstance(value, t) for t in types)


@jaxtyping.jaxtyped(typechecker=None)
def _first_mismatch(pairs: list[tuple[str, _Check, Any]]) -> int | None:
    """Index of the first array that fails, checking all in one jaxtyping context."""
    for index, (_, check, value) in enumerate(pairs):
        if not _matches(value, check.accepted()):
            return index
    return None


def validate(module: Any) -> None:
    """Check every array field of `module`, and every array in its container
    fields, against its annotation.

    **Raises:**

    `af.ValidationError` naming the class, the field (and the element), the
    annotation, the actual shape and dtype, and for a named dimension the field
    that fixed its size.
    """
    owner = class_name(type(module))
    pairs = []
    for name, field_check in _checked_fields(type(module)):
        for where, check, value in _stored_arrays(
            getattr(module, name), field_check, name
        ):
            if value is None:
                if check.allow_none:
                    continue
                annotation = format_annotation(check.annotation)
                raise ValidationError(
                    f"{owner}.{where}: expected {annotation}, got None. Pass an "
                    f"array, or annotate it {annotation} | None if None is allowed."
                )
            if _is_checkable(value):
                pairs.append((where, check, value))
            elif not (
                isinstance(value, check.passthrough) or _stands_in_for_an_array(value)
            ):
                raise ValidationError(
                    f"{owner}.{where}: expected "
                    f"{format_annotation(check.annotation)}, got "
                    f"{short_repr(value)} ({type(value).__name__}), which is not an "
                    "array. Pass an array, or name the type in the annotation "
                    "if the field may hold it."
                )
    failed = _first_mismatch(pairs)
    if failed is None:
        return
    where, check, value = pairs[failed]
    message = (
        f"{owner}.{where}: expected {format_annotation(check.annotation)}, "
        f"got {_describe(value)}."
    )
    if _first_mismatch([pairs[failed]]) is None:
        # Fine on its own: a named dimension disagrees with an earlier array.
        for other in pairs[:failed]:
            if _first_mismatch([other, pairs[failed]]) is not None:
                other_where, other_check, other_value = other
                message += (
                    f" Its named dimensions disagree with {owner}.{other_where} "
                    f"({format_annotation(other_check.annotation)}, got "
                    f"{_describe(other_value)}), which fixed their sizes first."
                )
                break
    raise ValidationError(message)


def _describe(value: Any) -> str:
    kind = "NumPy array" if isinstance(value, np.ndarray) else "JAX array"
    return f"{kind} {value_repr(value)} (shape {tuple(value.shape)}, {value.dtype})"
