"""Annotation -> `ArraySpec`: which fields hold arrays, of which type and dtypes.

Pure functions with no knowledge of equinox. Parsing happens once per annotation
(`array_spec` is cached); the per-value work lives in `_convert.py`.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
from typing import Annotated, Any, Literal, Union

import jax
import jax.numpy as jnp
import jaxtyping
import numpy as np

ArrayKind = Literal["jax", "numpy"]

# Annotations that are plain numbers. Inside a union with an array type they read as
# "a scalar is also accepted as input", so they do not stop conversion.
_NUMBER_TYPES = (bool, int, float, complex, np.bool_, np.number)


@dataclasses.dataclass(frozen=True)
class ArraySpec:
    """What an array-annotated field stores.

    - `kind`: `"jax"` for JAX arrays, `"numpy"` for NumPy arrays. When a union admits
      both (as `jax.typing.ArrayLike` does), JAX wins.
    - `dtypes`: the dtype names the annotation allows, or `None` for any dtype.
    - `allow_none`: the annotation admits `None` (`Optional`, `X | None`).
    - `passthrough`: other classes in the union (Modules, callables, ...); values of
      these types are stored as they are.
    - `is_key`: a jaxtyping `Key[...]` annotation: only existing key arrays fit.
    """

    kind: ArrayKind
    dtypes: frozenset[str] | None
    allow_none: bool = False
    passthrough: tuple[type, ...] = ()
    is_key: bool = False
    # (value dtype, x64 enabled) -> target dtype; filled lazily by `_convert.py`.
    target_cache: dict[Any, np.dtype] = dataclasses.field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    def with_dtype(self, dtype: np.dtype) -> ArraySpec:
        """The same spec with its dtype fixed (by `af.field(dtype=...)`)."""
        return dataclasses.replace(
            self, dtypes=frozenset({dtype.name}), target_cache={}, is_key=False
        )


def _array_member(member: Any) -> tuple[ArrayKind, frozenset[str] | None, bool] | None:
    """(kind, dtypes, is_key) if `member` is itself an array type, else None."""
    if member is jax.Array or member is jnp.array:
        return "jax", None, False
    if member is np.ndarray or member is np.array:
        return "numpy", None, False
    if isinstance(member, type) and issubclass(member, jaxtyping.AbstractArray):
        # jaxtyping's documented introspection attributes: array_type and dtypes.
        base = member.array_type  # type: ignore[attr-defined]
        if base is jax.Array:
            kind: ArrayKind = "jax"
        elif base is np.ndarray:
            kind = "numpy"
        else:  # e.g. a torch tensor: not ours to convert.
            return None
        raw = member.dtypes  # type: ignore[attr-defined]
        if isinstance(raw, (tuple, list)):
            names = frozenset(raw)
            is_key = "prng_key" in names
            return kind, (None if is_key else names), is_key
        return kind, None, False  # Shaped: any dtype
    if typing.get_origin(member) is np.ndarray:  # np.ndarray[Any, np.dtype[f32]]
        args = typing.get_args(member)
        dtype_args = typing.get_args(args[1]) if len(args) == 2 else ()
        if dtype_args and isinstance(dtype_args[0], type):
            try:
                return "numpy", frozenset({np.dtype(dtype_args[0]).name}), False
            except TypeError:
                pass
        return "numpy", None, False
    return None


def union_members(annotation: Any) -> list[Any]:
    """Flatten `Annotated`, `Optional`, `Union` and `X | Y` into their members."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return union_members(typing.get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return [m for arg in typing.get_args(annotation) for m in union_members(arg)]
    return [annotation]


@functools.lru_cache(maxsize=4096)
def _cached_array_spec(annotation: Any) -> ArraySpec | None:
    return _build_array_spec(annotation)


def array_spec(annotation: Any) -> ArraySpec | None:
    """The `ArraySpec` of a resolved annotation, or None if it does not denote an array.

    Cached per annotation: a model with many instances of one class parses once.
    """
    try:
        return _cached_array_spec(annotation)
    except TypeError:  # unhashable metadata inside Annotated[...]
        return _build_array_spec(annotation)


def _build_array_spec(annotation: Any) -> ArraySpec | None:
    kinds: list[ArrayKind] = []
    dtype_sets: list[frozenset[str] | None] = []
    allow_none = is_key = False
    passthrough: list[type] = []
    for member in union_members(annotation):
        if member is None or member is type(None):
            allow_none = True
            continue
        found = _array_member(member)
        if found is not None:
            kind, dtypes, member_is_key = found
            kinds.append(kind)
            dtype_sets.append(dtypes)
            is_key = is_key or member_is_key
        elif isinstance(member, type) and issubclass(member, _NUMBER_TYPES):
            continue
        else:
            origin = typing.get_origin(member)
            cls = origin if isinstance(origin, type) else member
            if isinstance(cls, type):
                passthrough.append(cls)
            else:  # Any, TypeVar, Callable[...] and friends: admit anything
                passthrough.append(object)
    if not kinds:
        return None
    if is_key or any(d is None for d in dtype_sets):
        dtypes = None
    else:
        dtypes = frozenset().union(*dtype_sets)  # type: ignore[arg-type]
    return ArraySpec(
        kind="jax" if "jax" in kinds else "numpy",
        dtypes=dtypes,
        allow_none=allow_none,
        passthrough=tuple(passthrough),
        is_key=is_key,
    )


class Unresolved(Exception):
    """A string annotation whose names are not (yet) defined."""


def resolve_annotation(annotation: Any, owner: type | None) -> Any:
    """Evaluate string annotations and `ForwardRef`s, as `typing.get_type_hints` would.

    Names are looked up in the class namespace of `owner` (the class whose body
    wrote the annotation), then in its module's globals.
    """
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        module = sys.modules.get(owner.__module__) if owner is not None else None
        namespace = dict(vars(module)) if module is not None else {}
        local = dict(vars(owner)) if owner is not None else {}
        try:
            annotation = eval(annotation, namespace, local)
        except Exception as error:
            raise Unresolved(f"{type(error).__name__}: {error}") from None
        return resolve_annotation(annotation, owner)
    args = typing.get_args(annotation)
    if any(isinstance(a, (str, typing.ForwardRef)) for a in args) and (
        typing.get_origin(annotation) in (Union, types.UnionType)
    ):
        members = [resolve_annotation(a, owner) for a in args]
        return Union[tuple(members)]  # noqa: UP007
    return annotation


def array_types(annotation: Any) -> tuple[type, ...]:
    """The array members of a resolved annotation, as classes `isinstance` accepts.

    jaxtyping's classes check dtype and shape; the legacy functions `np.array` and
    `jnp.array` stand for the array types they build.
    """
    legacy = {np.array: np.ndarray, jnp.array: jax.Array}
    found: list[type] = []
    for member in union_members(annotation):
        described = _array_member(member)
        if described is None:
            continue
        member = legacy.get(member, member)
        found.append(member)
        if described[0] == "numpy":
            # A JAX array passed to a NumPy field stays a JAX array (no copy to the
            # host), so it must pass the same check.
            found.append(_jax_twin(member))
    return tuple(found)


def _jax_twin(member: type) -> type:
    """The JAX counterpart of a NumPy array annotation (same dtypes and dims)."""
    if not issubclass(member, jaxtyping.AbstractArray):
        return jax.Array
    dtypes = member.dtypes  # type: ignore[attr-defined]
    if not isinstance(dtypes, (tuple, list)):
        return jaxtyping.Shaped[jax.Array, member.dim_str]  # type: ignore[attr-defined]
    # jaxtyping's documented way to define a dtype category: subclass AbstractDtype.
    category = type("Category", (jaxtyping.AbstractDtype,), {"dtypes": list(dtypes)})
    return category[jax.Array, member.dim_str]  # type: ignore[attr-defined]


def _admits_scalar(dims: str) -> bool:
    """Whether a jaxtyping dimension string matches shape `()`, by jaxtyping's rules."""
    scalar_shaped: Any = jaxtyping.Shaped[np.ndarray, dims]  # a class at runtime
    return isinstance(np.empty(()), scalar_shaped)


def init_annotation(annotation: Any) -> Any:
    """What `__init__` may receive for a field annotated `annotation`.

    jaxtyping/beartype check a dataclass `__init__` against its annotations, which
    equinox takes from a field converter's first parameter (`af.field`) and
    `ArrayModule` sets itself. So array members are widened to
    `Shaped[ArrayLike, dims] | list | tuple` (scalars and nested lists are welcome,
    shapes and named dimensions are still checked) and every other member is kept.
    """
    members = []
    for member in union_members(annotation):
        if _array_member(member) is None:
            members.append(member)
            continue
        dims = getattr(member, "dim_str", "...")
        members.append(jaxtyping.Shaped[jaxtyping.ArrayLike, dims])
        if _admits_scalar(dims):
            members.extend(_NUMBER_TYPES)
        members.extend([list, tuple])
    members = list(dict.fromkeys(members))
    return members[0] if len(members) == 1 else Union[tuple(members)]  # noqa: UP007
