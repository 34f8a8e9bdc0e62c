"""Opt-in validation of stored arrays against their jaxtyping annotations.

jaxtyping's runtime checks see `__init__` arguments, never what is stored after
conversion, so a `Float[Array, "3"]` field could hold shape `()` unnoticed. With
`class M(af.ArrayModule, check=True)` (or `ARRAYFIELD_CHECK=1` in the environment
when the class is defined), every array field of every new instance is checked
against its annotation after conversion: dtype category, shape, and named
dimensions shared across the fields of one instance. The checking itself is
jaxtyping's: `isinstance(value, Float[Array, "n"])` inside one `jaxtyped` context,
so dimension names bind across fields exactly as they do across function arguments.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from typing import Any

import jax
import jaxtyping
import numpy as np

from ._env import CHECK, env_flag
from ._errors import class_name, format_annotation, short_repr
from ._spec import ArraySpec, array_types

ENV_VAR = CHECK


class ValidationError(TypeError):
    """A stored array does not match its field's annotation (with `check=True`).

    The message names `ClassName.field`, the annotation, the actual shape and
    dtype, and, when a named dimension disagrees, the field that fixed its size.

    !!! example

        ```python
        from jaxtyping import Array, Float
        import arrayfield as af

        class Segment(af.ArrayModule, check=True):
            start: Float[Array, "2"]
            end: Float[Array, "2"]

        try:
            Segment(start=[0.0, 0.0], end=[1.0, 1.0, 1.0])
        except af.ValidationError as error:
            assert str(error).startswith("Segment.end: expected Float[Array, '2']")
        else:
            raise AssertionError("expected an af.ValidationError")
        ```
    """

    __module__ = "arrayfield"  # tracebacks and reprs show the public name


def enabled_by_environment() -> bool:
    """Whether `ARRAYFIELD_CHECK` asks for validation of newly defined classes."""
    return env_flag(ENV_VAR)


@dataclasses.dataclass(frozen=True)
class _CheckedField:
    name: str
    annotation: Any  # resolved, for the message
    types: tuple[type, ...]  # what isinstance must accept (union members)
    allow_none: bool


# Weak keys: classes made on the fly (in tests, in loops) must stay collectable.
_fields_cache: weakref.WeakKeyDictionary[type, tuple[_CheckedField, ...]] = (
    weakref.WeakKeyDictionary()
)
_fields_lock = threading.Lock()


def _checked_fields(cls: type) -> tuple[_CheckedField, ...]:
    """The array fields of `cls` and what to check them against; once per class."""
    try:
        return _fields_cache[cls]
    except KeyError:
        pass
    from ._module import field_converters  # the module layer imports us

    found = []
    for name, converter in field_converters(cls).items():
        spec = converter.resolved_spec()
        if not isinstance(spec, ArraySpec):
            continue  # None, or a container: its elements are not checked (yet)
        resolved = converter.resolved
        found.append(
            _CheckedField(name, resolved, array_types(resolved), spec.allow_none)
        )
    with _fields_lock:
        return _fields_cache.setdefault(cls, tuple(found))


def _is_checkable(value: Any) -> bool:
    # Pytrees admitted by a Union (Modules...) and ShapeDtypeStructs carry no data.
    return isinstance(value, (jax.Array, np.ndarray))


def _matches(value: Any, types: tuple[type, ...]) -> bool:
    return any(isinstance(value, t) for t in types)


@jaxtyping.jaxtyped(typechecker=None)
def _first_mismatch(pairs: list[tuple[_CheckedField, Any]]) -> int | None:
    """Index of the first field that fails, checking all in one jaxtyping context."""
    for index, (checked, value) in enumerate(pairs):
        if not _matches(value, checked.types):
            return index
    return None


def validate(module: Any) -> None:
    """Check every array field of `module` against its annotation.

    **Raises:**

    `af.ValidationError` naming the class, the field, the annotation, the actual
    shape and dtype, and for a named dimension the field that fixed its size.
    """
    pairs = []
    for checked in _checked_fields(type(module)):
        value = getattr(module, checked.name)
        if value is None:
            if checked.allow_none:
                continue
            annotation = format_annotation(checked.annotation)
            raise ValidationError(
                f"{class_name(type(module))}.{checked.name}: expected {annotation}, "
                f"got None. Pass an array, or annotate the field {annotation} | None "
                "if None is allowed."
            )
        if _is_checkable(value):
            pairs.append((checked, value))
    failed = _first_mismatch(pairs)
    if failed is None:
        return
    checked, value = pairs[failed]
    owner = class_name(type(module))
    message = (
        f"{owner}.{checked.name}: expected {format_annotation(checked.annotation)}, "
        f"got {_describe(value)}."
    )
    if _first_mismatch([(checked, value)]) is None:
        # Fine on its own: a named dimension disagrees with an earlier field.
        for other, other_value in pairs[:failed]:
            if _first_mismatch([(other, other_value), (checked, value)]) is not None:
                message += (
                    f" Its named dimensions disagree with {owner}.{other.name} "
                    f"({format_annotation(other.annotation)}, got "
                    f"{_describe(other_value)}), which fixed their sizes first."
                )
                break
    raise ValidationError(message)


def _describe(value: Any) -> str:
    kind = "NumPy array" if isinstance(value, np.ndarray) else "JAX array"
    return f"{kind} {short_repr(value)} (shape {tuple(value.shape)}, {value.dtype})"
