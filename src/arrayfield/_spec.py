"""Annotation -> `ArraySpec`: which fields hold arrays, of which type and dtypes.

Pure functions with no knowledge of equinox. Parsing happens once per annotation
(`field_spec` is cached); the per-value work lives in `_convert.py`.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
from typing import Annotated, Any, Literal, Optional, Union

import jax
import jax.numpy as jnp
import jaxtyping
import numpy as np

from ._facts import PYTHON_NUMBERS

ArrayKind = Literal["jax", "numpy"]

# An annotation that names a Python number type (PYTHON_NUMBERS) admits that Python
# value as it is (`int | Array`, optimistix-style `ScalarLike`, `ArrayLike`).
# What else a named Python number type admits, as type checkers read it (PEP 484's
# numeric tower): an int where a float is expected, a float where a complex is.
_NUMERIC_TOWER: dict[type, tuple[type, ...]] = {float: (int,), complex: (float, int)}


@dataclasses.dataclass(frozen=True)
class ArraySpec:
    """What an array-annotated field stores.

    - `kind`: what a value that is not yet an array (a number, a list) becomes:
      `"jax"` for a JAX array, `"numpy"` for a NumPy array. When a union admits
      both (as `Float[Array, ""] | Float[np.ndarray, ""]` does), JAX wins.
    - `dtypes`: the dtype names the annotation allows, or `None` for any dtype.
    - `admits_numpy`: the union has a NumPy array member, so a NumPy array passed in
      stays a NumPy array (with NumPy's dtypes, whatever `jax_enable_x64` says).
    - `allow_none`: the annotation admits `None` (`Optional`, `X | None`).
    - `passthrough`: the union's other members (Python number types, Modules,
      callables, ...): a value of one of these types is stored as it is, because the
      annotation admits it as it is.
    - `is_key`: a jaxtyping `Key[...]` annotation: only existing key arrays fit.
    """

    kind: ArrayKind
    dtypes: frozenset[str] | None
    allow_none: bool = False
    passthrough: tuple[type, ...] = ()
    is_key: bool = False
    admits_numpy: bool = False
    # (value dtype, x64 enabled) -> target dtype; filled lazily by `_convert.py`.
    target_cache: dict[Any, np.dtype] = dataclasses.field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    def with_dtype(self, dtype: np.dtype) -> ArraySpec:
        """The same spec with its dtype fixed (by `af.field(dtype=...)`)."""
        return dataclasses.replace(
            self, dtypes=frozenset({dtype.name}), target_cache={}, is_key=False
        )


ContainerKind = Literal["list", "tuple", "dict", "pytree"]


@dataclasses.dataclass(frozen=True)
class ContainerSpec:
    """A container whose annotation says every element is an array.

    `list[Float[Array, ""]]`, `tuple[Float[Array, ""], ...]`, `tuple[X, Y]`,
    `dict[str, Float[Array, "n"]]` and jaxtyping's `PyTree[Float[Array, "..."]]`:
    each element (each leaf, for `PyTree`) is converted by its own spec.

    - `elements`: one spec for every element, or one per position (`fixed`).
    - `fixed`: a `tuple[X, Y]` with one spec per position.
    - `annotations`: the element annotations `elements` came from (what
      `check=True` validates each element against).

    `None` is stored as it is in any container field, as in an array field.
    """

    container: ContainerKind
    elements: tuple[FieldSpec, ...]
    fixed: bool = False
    annotations: tuple[Any, ...] = dataclasses.field(
        default=(), compare=False, hash=False, repr=False
    )

    def with_dtype(self, dtype: np.dtype) -> ContainerSpec:
        """The same spec with the dtype of every element fixed."""
        elements = tuple(e.with_dtype(dtype) for e in self.elements)
        return dataclasses.replace(self, elements=elements)


FieldSpec = Union[ArraySpec, ContainerSpec]  # noqa: UP007 (a runtime alias on 3.10)


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


def _is_type_alias(annotation: Any) -> bool:
    """A PEP 695 alias: `type Scalar = ...` (3.12+), `typing_extensions.TypeAliasType`.

    Recognised by its type's name and attributes, as `typing_extensions` (not a
    dependency) defines its own class before 3.12.
    """
    return type(annotation).__name__ == "TypeAliasType" and hasattr(
        annotation, "__value__"
    )


def unalias(annotation: Any) -> Any:
    """The annotation a PEP 695 alias stands for, generic aliases substituted
    (`Pair[Float[Array, ""]]` of `type Pair[T] = tuple[T, T]`); others unchanged.

    `__value__` is evaluated lazily by Python, so an alias naming a class defined
    later resolves here, on first use.
    """
    while True:
        if _is_type_alias(annotation):
            annotation = annotation.__value__
            continue
        origin = typing.get_origin(annotation)
        if not _is_type_alias(origin):
            return annotation
        value, args = origin.__value__, typing.get_args(annotation)
        parameters = getattr(value, "__parameters__", ())
        if len(parameters) != len(args):
            raise TypeError(
                f"cannot substitute {args} into the type alias "
                f"{origin.__name__} = {value!r}"
            )
        annotation = value[args if len(args) != 1 else args[0]]


def union_members(annotation: Any) -> list[Any]:
    """Flatten `Annotated`, `Optional`, `Union` and `X | Y` into their members,
    type aliases into what they stand for."""
    annotation = unalias(annotation)
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return union_members(typing.get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return [m for arg in typing.get_args(annotation) for m in union_members(arg)]
    return [annotation]


@functools.lru_cache(maxsize=4096)
def _cached_field_spec(annotation: Any) -> FieldSpec | None:
    return _build_field_spec(annotation)


def field_spec(annotation: Any) -> FieldSpec | None:
    """The spec of a resolved annotation, or None if arrayfield leaves it alone.

    Cached per annotation: a model with many instances of one class parses once.
    """
    try:
        return _cached_field_spec(annotation)
    except TypeError:  # unhashable metadata inside Annotated[...]
        return _build_field_spec(annotation)


def _build_field_spec(annotation: Any) -> FieldSpec | None:
    members = union_members(annotation)
    allow_none = any(m is None or m is type(None) for m in members)
    others = [m for m in members if m is not None and m is not type(None)]
    if len(others) == 1:
        container = _container_spec(others[0])
        if container is not None:
            return container
    return _build_array_spec(others, allow_none)


def _container_spec(member: Any) -> ContainerSpec | None:
    """A `ContainerSpec` if `member` is a container of arrays, else None."""
    if isinstance(member, type) and issubclass(member, jaxtyping.PyTree):
        leaf = getattr(member, "leaftype", None)  # None for a bare `PyTree`
        spec = None if leaf is None else field_spec(leaf)
        if spec is None:
            return None
        return ContainerSpec("pytree", (spec,), annotations=(leaf,))
    origin = typing.get_origin(member)
    args = typing.get_args(member)
    if origin is list and len(args) == 1:
        kind: ContainerKind = "list"
        element_annotations, fixed = args, False
    elif origin is dict and len(args) == 2:
        kind, element_annotations, fixed = "dict", args[1:], False
    elif origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        kind, element_annotations, fixed = "tuple", args[:1], False
    elif origin is tuple and args and Ellipsis not in args and args != ((),):
        kind, element_annotations, fixed = "tuple", args, True
    else:
        return None
    elements = tuple(field_spec(a) for a in element_annotations)
    if any(e is None for e in elements):  # e.g. tuple[Array, int]: not all arrays
        return None
    return ContainerSpec(
        kind,
        elements,  # type: ignore[arg-type]
        fixed=fixed,
        annotations=element_annotations,
    )


def _build_array_spec(members: list[Any], allow_none: bool) -> ArraySpec | None:
    kinds: list[ArrayKind] = []
    dtype_sets: list[frozenset[str] | None] = []
    is_key = False
    passthrough: list[type] = []
    for member in members:
        found = _array_member(member)
        if found is not None:
            kind, dtypes, member_is_key = found
            kinds.append(kind)
            dtype_sets.append(dtypes)
            is_key = is_key or member_is_key
            continue
        admitted = _admitted_classes(member)
        if admitted is None:
            # `Any`, a TypeVar...: the union admits every value as it is, so
            # nothing is converted (and no value's fate depends on its type).
            return None
        for cls in admitted:
            passthrough.append(cls)
            passthrough.extend(_NUMERIC_TOWER.get(cls, ()))
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
        passthrough=tuple(dict.fromkeys(passthrough)),
        is_key=is_key,
        admits_numpy="numpy" in kinds,
    )


def _admitted_classes(member: Any) -> tuple[type, ...] | None:
    """The classes whose instances a non-array union member admits as they are,
    for `isinstance`; None when it admits anything (or nothing can tell)."""
    origin = typing.get_origin(member)
    if origin is Literal:  # Literal["auto"] admits those values: their types
        return tuple(dict.fromkeys(type(value) for value in typing.get_args(member)))
    supertype = getattr(member, "__supertype__", None)  # a typing.NewType
    if supertype is not None:
        return _admitted_classes(supertype)
    cls = origin if isinstance(origin, type) else member
    if not isinstance(cls, type):  # Any, a TypeVar, ...
        return None
    try:
        isinstance(None, cls)
    except TypeError:  # a Protocol that is not runtime_checkable
        return None
    return (cls,)


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
    """Whether a jaxtyping dimension string matches shape `()`, by jaxtyping's rules.

    A `?` (a size that may differ across the leaves of a structured `PyTree`) is
    only valid inside one and has no bearing on shape `()`: it is dropped here.
    """
    scalar_shaped: Any = jaxtyping.Shaped[np.ndarray, dims.replace("?", "")]
    return isinstance(np.empty(()), scalar_shaped)


_NUMBER_INPUTS = (*PYTHON_NUMBERS, np.bool_, np.number)


def init_annotation(annotation: Any) -> Any:
    """What `__init__` may receive for a field annotated `annotation`.

    jaxtyping/beartype check a dataclass `__init__` against its annotations, which
    equinox takes from a field converter's first parameter (`af.field`) and
    `ArrayModule` sets itself. So array members are widened to
    `Shaped[ArrayLike, dims] | list | tuple` (scalars and nested lists are welcome,
    shapes and named dimensions are still checked), containers of arrays to the
    same container of widened elements, and every other member is kept.
    """
    return _widen(annotation, in_pytree=False)


def _widen(annotation: Any, in_pytree: bool) -> Any:
    """`init_annotation`; `in_pytree` for the leaf type of a `PyTree[...]`.

    A `PyTree` takes every value its leaf type admits as one leaf, so a leaf type
    widened with `list | tuple` would make a tuple one leaf and change the
    structure its name binds. Inside a `PyTree` only scalars are added, which are
    leaves anyway; arrayfield converts a list there leaf by leaf, as structure.
    """
    members = union_members(annotation)
    if len(members) <= 2:
        container = _widen_container(members)
        if container is not None:
            return container
    widened = []
    for member in members:
        if _array_member(member) is None:
            widened.append(member)
            continue
        dims = getattr(member, "dim_str", "...")
        widened.append(jaxtyping.Shaped[jaxtyping.ArrayLike, dims])
        if _admits_scalar(dims):
            widened.extend(_NUMBER_INPUTS)
        if not in_pytree:
            widened.extend([list, tuple])
    widened = list(dict.fromkeys(widened))
    return widened[0] if len(widened) == 1 else Union[tuple(widened)]  # noqa: UP007


def _widen_container(members: list[Any]) -> Any:
    """`init_annotation` of `list[X]`, `tuple[X, ...]`, `dict[K, X]`, `PyTree[X]`."""
    others = [m for m in members if m is not None and m is not type(None)]
    if len(others) != 1 or _container_spec(others[0]) is None:
        return None
    member = others[0]
    if isinstance(member, type) and issubclass(member, jaxtyping.PyTree):
        # The structure name (`PyTree[X, "S"]`) binds across fields: keep it.
        leaf = _widen(member.leaftype, in_pytree=True)  # type: ignore[attr-defined]
        structure = member.structure  # type: ignore[attr-defined]
        named = leaf if structure is None else (leaf, structure)
        widened: Any = jaxtyping.PyTree[named]
    else:
        origin: Any = typing.get_origin(member)  # list, tuple or dict
        keys_kept = 1 if origin is dict else 0
        args = tuple(
            a if a is Ellipsis or i < keys_kept else init_annotation(a)
            for i, a in enumerate(typing.get_args(member))
        )
        widened = types.GenericAlias(origin, args)
    return widened if len(others) == len(members) else Optional[widened]  # noqa: UP045
