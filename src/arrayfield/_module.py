"""`ArrayModule`, `field` and `normalize`: the one place that touches equinox's classes.

The mechanism is equinox's own public hook: a field converter. Equinox runs
converters after *any* `__init__` (dataclass or custom) and before `__check_init__`,
which is exactly when a scalar should become an array. `ArrayModule` attaches a
`FieldConverter` to each array-annotated field when a subclass is created;
`af.field` attaches one to a single field of any Module.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import sys
import threading
import types
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import equinox as eqx
import jax
import numpy as np

from ._convert import Rejected, to_array
from ._errors import AnnotationWarning, ConversionError, format_annotation, short_repr
from ._spec import (
    ArraySpec,
    Unresolved,
    array_spec,
    init_annotation,
    is_not_a_field,
    resolve_annotation,
)
from ._validate import enabled_by_environment, validate

# Key under which `af.field` records its options in a dataclass field's metadata.
_OPTIONS_KEY = "arrayfield"


@dataclasses.dataclass(frozen=True)
class FieldOptions:
    convert: bool
    dtype: np.dtype | None


_NOT_YET = object()  # a FieldConverter whose annotation has not been resolved yet


class FieldConverter:
    """Converts one field of one class. Equinox calls it after `__init__`.

    Resolution of the annotation is lazy when it must be (forward references) and
    happens at most once per field of a class, never per instance.
    """

    __slots__ = (
        "__signature__",
        "_lock",
        "annotation",
        "dtype",
        "name",
        "namespace",
        "owner",
        "resolved",
        "spec",
        "user_converter",
    )

    def __init__(
        self,
        *,
        owner: type | None,
        name: str | None,
        annotation: Any,
        dtype: np.dtype | None = None,
        user_converter: Callable[[Any], Any] | None = None,
        namespace: dict | None = None,
    ):
        self.owner = owner
        self.name = name
        self.annotation = annotation
        self.dtype = dtype
        self.user_converter = user_converter
        self.namespace = namespace
        self.spec: ArraySpec | object | None = _NOT_YET
        self.resolved: Any = None  # the annotation as an object, once resolved
        self._lock = threading.Lock()
        self.__signature__ = _signature(Any)

    # -- resolution -------------------------------------------------------------

    def bind(self, owner: type, name: str, annotation: Any) -> None:
        """Attach to `owner.name`; resolve the annotation now if it can be."""
        self.owner, self.name, self.annotation = owner, name, annotation
        self.spec = _NOT_YET
        try:
            resolved = resolve_annotation(annotation, owner, self.namespace)
        except Unresolved:
            first_param = annotation  # keep the string; beartype resolves it later
        else:
            spec = self._set_spec(resolved)
            first_param = annotation if spec is None else init_annotation(resolved)
        if self.user_converter is not None:
            first_param = _first_parameter_annotation(self.user_converter)
        self.__signature__ = _signature(first_param)

    def _resolve(self) -> ArraySpec | None:
        return self._set_spec(
            resolve_annotation(self.annotation, self.owner, self.namespace)
        )

    def _set_spec(self, resolved: Any) -> ArraySpec | None:
        self.resolved = resolved
        spec = array_spec(resolved)
        if spec is None and self.dtype is not None:
            raise ConversionError(
                f"{self.where}: af.field(dtype=...) asks for an array, but the "
                f"annotation {format_annotation(self.annotation)} does not denote an "
                "array. "
                'Annotate the field as an array, e.g. Float[Array, ""].'
            )
        if spec is not None and self.dtype is not None:
            spec = spec.with_dtype(self.dtype)
        self.spec = spec
        return spec

    def resolved_spec(self) -> ArraySpec | None:
        """The field's spec, resolving a forward reference on first use."""
        spec = self.spec
        if spec is not _NOT_YET:
            return spec  # type: ignore[return-value]
        with self._lock:
            if self.spec is not _NOT_YET:
                return self.spec  # type: ignore[return-value]
            try:
                return self._resolve()
            except Unresolved as error:
                warnings.warn(
                    f"{self.where}: cannot resolve the annotation "
                    f"{self.annotation!r} ({error}), so this field is not converted. "
                    "Import the names it uses at runtime (not only under "
                    "TYPE_CHECKING), or opt the field out with "
                    "af.field(convert=False).",
                    AnnotationWarning,
                    stacklevel=4,
                )
                self.spec = None
                return None

    @property
    def where(self) -> str:
        owner = "<unbound>"
        if self.owner is not None:  # "Outer.Inner", without "f.<locals>."
            owner = self.owner.__qualname__.rsplit("<locals>.", 1)[-1]
        return f"{owner}.{self.name}"

    # -- conversion -------------------------------------------------------------

    def __call__(self, value: Any) -> Any:
        if self.user_converter is not None:
            value = self.user_converter(value)
        spec = self.spec
        if type(spec) is not ArraySpec:  # not resolved yet, or not an array field
            return self.to_array(value)
        try:  # the hot path, one call layer shorter than self.to_array
            return to_array(value, spec)
        except Rejected as reason:
            raise self._error(value, reason) from None

    def to_array(self, value: Any) -> Any:
        """Our conversion alone (no user converter): what `normalize` re-runs."""
        spec = self.spec
        if spec is _NOT_YET:
            spec = self.resolved_spec()
        if spec is None:
            return value
        try:
            return to_array(value, spec)  # type: ignore[arg-type]
        except Rejected as reason:
            raise self._error(value, reason) from None

    def _error(self, value: Any, reason: Rejected) -> ConversionError:
        return ConversionError(
            f"{self.where}: cannot store {short_repr(value)} "
            f"({type(value).__name__}) in a field annotated "
            f"{format_annotation(self.annotation)}: {reason}."
        )

    def __repr__(self) -> str:
        return f"<arrayfield converter for {self.where}>"


def _signature(first_param: Any) -> inspect.Signature:
    return inspect.Signature(
        [
            inspect.Parameter(
                "value", inspect.Parameter.POSITIONAL_ONLY, annotation=first_param
            )
        ]
    )


def _first_parameter_annotation(function: Callable) -> Any:
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return Any
    if not parameters or parameters[0].annotation is inspect.Parameter.empty:
        return Any
    return parameters[0].annotation


# -- af.field -------------------------------------------------------------------


class _ArrayField(dataclasses.Field):
    """A dataclass field that learns its owner and name when its class is created."""

    __slots__ = ()

    def __set_name__(self, owner: type, name: str) -> None:
        super().__set_name__(owner, name)
        converter = self.metadata.get("converter")
        if isinstance(converter, FieldConverter) and converter.owner is None:
            annotation = inspect.get_annotations(owner).get(name, Any)
            converter.bind(owner, name, annotation)


def field(
    *,
    convert: bool = True,
    dtype: Any = None,
    **kwargs: Any,
) -> Any:
    """Declare how one field is converted; everything else goes to `eqx.field`.

    **Arguments:**

    - `convert`: on an `af.ArrayModule`, `False` opts this field out, e.g. for a list
        of ints used as a static FFT shape in a field legacy code annotates
        `jnp.array`. On a plain `eqx.Module`, `True` (the default) opts this one field
        in: it is converted from its annotation exactly as `ArrayModule` would.
    - `dtype`: store the field with this dtype instead of the one the annotation
        implies (any spelling NumPy understands: `jnp.float32`, `"int8"`, ...).
    - `**kwargs`: passed on to `eqx.field` (`default`, `static`, `converter`, ...). A
        `converter` you pass runs first; arrayfield converts its result.

    **Returns:**

    A dataclass field, to be used as the default value in a class body.

    **Raises:**

    `TypeError` if `dtype` is given together with `convert=False` or `static=True`;
    `af.ConversionError` when the class is created if `dtype` is given for a field
    whose annotation does not denote an array.

    !!! example

        ```python
        import equinox as eqx
        import jax.numpy as jnp
        from jaxtyping import Array, Float
        import arrayfield as af

        class Source(eqx.Module):
            flux: Float[Array, ""] = af.field()          # opted in
            shape: jnp.array = af.field(convert=False, static=True)

        src = Source(flux=2, shape=(64, 64))
        assert src.flux.dtype == jnp.float32 and src.shape == (64, 64)
        ```
    """
    np_dtype = None if dtype is None else np.dtype(dtype)
    static = kwargs.get("static", False)
    if np_dtype is not None and (not convert or static):
        raise TypeError(
            "af.field(dtype=...) converts the field to an array; it cannot be combined "
            "with convert=False or static=True."
        )
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata[_OPTIONS_KEY] = FieldOptions(convert=convert, dtype=np_dtype)
    if not convert or static:
        return eqx.field(metadata=metadata, **kwargs)
    converter = FieldConverter(
        owner=None,
        name=None,
        annotation=Any,
        dtype=np_dtype,
        user_converter=kwargs.pop("converter", None),
        # The class body calling us runs in its module's globals: keep them to
        # resolve string annotations later, as typing.get_type_hints would.
        namespace=sys._getframe(1).f_globals,
    )
    result = eqx.field(converter=converter, metadata=metadata, **kwargs)
    result.__class__ = _ArrayField
    return result


# -- ArrayModule ----------------------------------------------------------------


def _own_annotations(cls: type) -> dict[str, Any]:
    # The class's own dict, mutated in place: we may redeclare inherited fields.
    annotations = cls.__dict__.get("__annotations__")  # noqa: RUF063
    if annotations is None:
        annotations = {}
        cls.__annotations__ = annotations
    return annotations


def _with_converter(
    name: str, annotation: Any, existing: Any, source: type
) -> dataclasses.Field | None:
    """`existing` (a default or a field) with a FieldConverter attached.

    None when the field needs none: static, opted out, already converted by
    `af.field`, or annotated with something that is not an array.
    """
    if isinstance(existing, dataclasses.Field):
        metadata = existing.metadata
        if metadata.get("static", False):
            return None
        options = metadata.get(_OPTIONS_KEY)
        if options is not None and not options.convert:
            return None
        user_converter = metadata.get("converter")
        if isinstance(user_converter, FieldConverter):
            return None  # af.field(...) already bound it
        new_field = copy.copy(existing)
    else:
        user_converter = None
        new_field = (
            eqx.field()
            if existing is dataclasses.MISSING
            else eqx.field(default=existing)
        )
    converter = FieldConverter(
        owner=source, name=name, annotation=annotation, user_converter=user_converter
    )
    converter.bind(source, name, annotation)
    if converter.spec is None:
        return None
    new_field.metadata = types.MappingProxyType(
        {**new_field.metadata, "converter": converter}
    )
    return new_field


def _fields_from_plain_modules(cls: type) -> dict[str, tuple[type, dataclasses.Field]]:
    """Fields `cls` inherits from bases that are not ArrayModules (to convert too)."""
    inherited: dict[str, tuple[type, dataclasses.Field]] = {}
    for base in reversed(cls.__mro__[1:]):
        if "__dataclass_fields__" in base.__dict__:  # a dataclass in its own right
            for base_field in dataclasses.fields(base):
                inherited[base_field.name] = (base, base_field)
    return {
        name: (base, f)
        for name, (base, f) in inherited.items()
        if not issubclass(base, ArrayModule)
    }


class ArrayModule(eqx.Module):
    """`eqx.Module`, with array-annotated fields stored as strongly typed arrays.

    Subclass it instead of `eqx.Module`. After any `__init__` (the dataclass one or
    your own) and before `__check_init__`, each field whose annotation denotes an
    array (`jax.Array`, `np.ndarray`, `ArrayLike`, jaxtyping's `Float[Array, "n"]`
    and friends, also inside `Optional`/`Union`/`Annotated`) is converted:

    - Python and NumPy scalars, NumPy arrays and nested lists of numbers become an
      array of the annotated type (JAX for JAX annotations, NumPy for `np.ndarray`),
      strongly typed, with the dtype the annotation asks for.
    - A JAX array with an allowed dtype is kept as is (same object); a weakly typed
      one is made strong.
    - `None`, tracers, `jax.ShapeDtypeStruct` and other pytrees the annotation's union
      admits are stored unchanged.
    - Anything else, and any conversion that would change a value, raises
      `af.ConversionError` naming the class, the field, the annotation and the value.

    Fields declared `static=True`, opted out with `af.field(convert=False)`, or
    annotated with a non-array type (`int`, `str`, callables, Modules...) are left
    exactly as they are: a Python `int` annotated `int` is still a hashable flag.

    Why: `eqx.filter_jit` hashes non-array leaves into its cache key, so a field that
    holds a Python number recompiles on every new value, and `1`, `1.0` and `True`
    hash alike, so a trace may be reused with the wrong dtype.

    **Raises:**

    `af.ConversionError` at construction when a field's value cannot be stored
    without changing it, and from `af.normalize` likewise.

    !!! example

        ```python
        import jax.numpy as jnp
        from jaxtyping import Array, Float, Int
        import arrayfield as af

        class Counter(af.ArrayModule):
            count: Int[Array, ""]
            rate: Float[Array, ""] = 0.5

        c = Counter(count=0)
        assert c.count.dtype == jnp.int32 and not c.count.weak_type
        assert c.rate.dtype == jnp.float32
        ```
    """

    def __init_subclass__(cls, *, check: bool | None = None, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        if check if check is not None else enabled_by_environment():
            _install_validation(cls)
        # Runs inside type.__new__, before equinox turns the class into a dataclass,
        # so the converters we attach here are the ones the dataclass picks up.
        own = _own_annotations(cls)
        for name, annotation in list(own.items()):
            if is_not_a_field(annotation):
                continue
            default = cls.__dict__.get(name, dataclasses.MISSING)
            new_field = _with_converter(name, annotation, default, cls)
            if new_field is not None:
                setattr(cls, name, new_field)
        for name, (base, base_field) in _fields_from_plain_modules(cls).items():
            if name in own or name in cls.__dict__:
                continue
            new_field = _with_converter(name, base_field.type, base_field, base)
            if new_field is not None:
                # Redeclare the inherited field here; dataclasses keeps its position.
                own[name] = base_field.type
                setattr(cls, name, new_field)


def _install_validation(cls: type) -> None:
    """Validate new instances of `cls` before any `__check_init__` of its own."""
    if any(getattr(base, "__arrayfield_validates__", False) for base in cls.__mro__):
        return  # a base already validates every instance, subclasses included
    own_check = cls.__dict__.get("__check_init__")

    def __check_init__(self):
        validate(self)
        if own_check is not None:
            own_check(self)

    cls.__check_init__ = __check_init__
    cls.__arrayfield_validates__ = True


# -- normalize --------------------------------------------------------------------

_T = TypeVar("_T")


def _is_module(node: Any) -> bool:
    return isinstance(node, eqx.Module)


def normalize(tree: _T) -> _T:
    """Re-convert every `ArrayModule` / `af.field` field in a pytree.

    Use it on trees built without `__init__`: `eqx.tree_at(lambda m: m.x, m, 5.0)`,
    `jax.tree_util.tree_unflatten`, deserialisation, hand-edited checkpoints. Works on
    any pytree (lists, dicts, optax states...) containing such modules, at any depth.
    Nothing is copied that does not change: `normalize(normalize(t))` returns the
    very same objects as `normalize(t)`.

    **Arguments:**

    - `tree`: any pytree.

    **Returns:**

    The same tree with converted fields; unchanged subtrees are the same objects.

    **Raises:**

    `af.ConversionError`, as construction would.

    !!! example

        ```python
        import equinox as eqx
        from jaxtyping import Array, Float
        import arrayfield as af

        class Star(af.ArrayModule):
            flux: Float[Array, ""]

        star = eqx.tree_at(lambda s: s.flux, Star(flux=1.0), 5.0)  # a Python float
        star = af.normalize(star)
        assert star.flux.dtype == "float32"
        ```
    """
    nodes, treedef = jax.tree_util.tree_flatten(tree, is_leaf=_is_module)
    normalized = [_normalize_node(node) for node in nodes]
    if all(new is old for new, old in zip(normalized, nodes, strict=True)):
        return tree  # nothing changed: keep every container, not a rebuilt copy
    return jax.tree_util.tree_unflatten(treedef, normalized)


def _normalize_node(node: Any) -> Any:
    if not _is_module(node):
        return node
    updates = {}
    for f in dataclasses.fields(node):
        old = node.__dict__.get(f.name, dataclasses.MISSING)
        if old is dataclasses.MISSING or f.metadata.get("static", False):
            continue
        new = normalize(old)
        converter = f.metadata.get("converter")
        if isinstance(converter, FieldConverter):
            new = converter.to_array(new)
        if new is not old:
            updates[f.name] = new
    if not updates:
        return node
    rebuilt = object.__new__(type(node))
    for key, value in {**node.__dict__, **updates}.items():
        object.__setattr__(rebuilt, key, value)
    return rebuilt
