"""What static type checkers see: `af.Field[T]`, and `ArrayModule` as a plain class.

At runtime `af.Field[T]` is `T` itself, so arrayfield, jaxtyping, beartype,
validation, the diagnostics and serialisation all read the annotation `T`. To a
type checker it is a descriptor whose `__get__` returns `T` and whose `__set__`
also takes the numbers, NumPy arrays and nested lists arrayfield converts; for a
`dataclass_transform` class, pyright and mypy type an `__init__` parameter from
`__set__` and an attribute from `__get__`.

The runtime `ArrayModule` subclasses equinox's Module as captured at import (a
variable to a checker) and says nothing of `af.field`, so checkers are shown the
`ArrayModule` declared here: an `eqx.Module` subclass that names `af.field` as a
field specifier.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

_T = TypeVar("_T")

if TYPE_CHECKING:
    import dataclasses
    import sys
    from collections.abc import Sequence
    from typing import TypeAlias, overload

    import equinox as eqx
    import jax
    import numpy as np

    if sys.version_info >= (3, 11):
        from typing import dataclass_transform
    else:
        from typing_extensions import dataclass_transform

    from ._field import field

    # What arrayfield converts besides the annotated type itself. Nested lists go
    # four deep, spelled out: a recursive alias would let mypy accept a `str`
    # (a sequence of strings, of strings, ...).
    _Number: TypeAlias = (
        bool | int | float | complex | np.generic | np.ndarray | jax.Array
    )
    _Nested1: TypeAlias = _Number | Sequence[_Number]
    _Nested2: TypeAlias = _Number | Sequence[_Nested1]
    _Nested3: TypeAlias = _Number | Sequence[_Nested2]
    _Convertible: TypeAlias = _Number | Sequence[_Nested3]

    class Field(Generic[_T]):
        """An array field: `x: af.Field[Float[Array, ""]]` holds the annotation
        inside, and `__init__` also takes the numbers, NumPy arrays and nested
        lists arrayfield converts to it. At runtime `af.Field[A]` is `A`."""

        @overload
        def __get__(self, instance: None, owner: type[Any]) -> Field[_T]: ...
        @overload
        def __get__(self, instance: object, owner: type[Any]) -> _T: ...
        def __get__(self, instance: object, owner: type[Any]) -> Any: ...
        def __set__(self, instance: object, value: _T | _Convertible) -> None: ...

    @dataclass_transform(field_specifiers=(dataclasses.field, eqx.field, field))
    class ArrayModule(eqx.Module):
        """`eqx.Module`, with array-annotated fields stored as strongly typed arrays.

        (What type checkers read; the class itself is in `_module.py`.)
        """

        def __init_subclass__(
            cls, *, check: bool | None = None, **kwargs: Any
        ) -> None: ...

else:

    class Field:
        """An array field's annotation, as static type checkers should read it.

        `x: af.Field[Float[Array, ""]]` is exactly `x: Float[Array, ""]` at runtime:
        `af.Field[T]` returns `T`, so every rule, check and diagnostic reads the
        annotation inside. It exists for pyright and mypy, which then accept
        `Scene(x=0)`, `Scene(x=[1.0, 2.0])` and `Scene(x=np.zeros(3))` (what
        arrayfield converts), still reject `Scene(x="bright")`, and type `scene.x`
        as the array type. Use it on `af.ArrayModule` fields (a plain `eqx.Module`
        does not convert, so its fields should keep the bare annotation). A
        default is written `= af.field(default=0)`: a bare `= 0` is checked
        against the annotation, and `0` is not an `af.Field`.

        !!! example

            ```python
            import jax.numpy as jnp
            from jaxtyping import Array, Float, Int
            import arrayfield as af

            class Scene(af.ArrayModule):
                x: af.Field[Float[Array, "n"]]
                steps: af.Field[Int[Array, ""]] = af.field(default=0)

            scene = Scene(x=[0.0, 1.0])  # clean under pyright and mypy
            assert scene.x.dtype == jnp.float32 and scene.steps.dtype == jnp.int32
            assert af.Field[Array] is Array  # at runtime, the annotation itself
            ```
        """

        __slots__ = ()

        def __class_getitem__(cls, annotation: Any) -> Any:
            if isinstance(annotation, tuple):
                raise TypeError(
                    "af.Field takes one annotation, e.g. "
                    f'af.Field[Float[Array, ""]]; got {len(annotation)}.'
                )
            return annotation

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            raise TypeError(
                'af.Field is only an annotation: write `x: af.Field[Float[Array, ""]]`.'
            )
