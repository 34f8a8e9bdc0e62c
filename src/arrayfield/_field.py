"""`af.field`, `FieldConverter`, and the converters of an ArrayModule's fields.

A `FieldConverter` converts one field of one class, as the field's equinox
converter (`eqx.field(converter=...)`, equinox's public hook, which runs after
any `__init__`): `af.field(...)` gives one to a single field (how fields of plain
`eqx.Module`s opt in), and `_declare` gives one to every array field of an
`ArrayModule` class while the class is created. Its annotation is parsed once
per class (or on first use for forward references), never per instance.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import threading
from collections.abc import Callable
from typing import Any, NoReturn

import equinox as eqx
import jax
import numpy as np

from . import _facts
from ._convert import Rejected, dtype_set, looks_numeric, to_array, to_field_value
from ._errors import (
    AnnotationWarning,
    ConversionError,
    class_name,
    did_you_mean,
    format_annotation,
    short_repr,
    type_label,
    value_repr,
    warn_in_user_code,
)
from ._spec import (
    ArraySpec,
    FieldSpec,
    Unresolved,
    field_spec,
    init_annotation,
    resolve_annotation,
    union_members,
)
from ._typing import Field as BareField  # `af.Field` written without `[T]`

# Key under which `af.field` records its options in a dataclass field's metadata.
OPTIONS_KEY = "arrayfield"


@dataclasses.dataclass(frozen=True)
class FieldOptions:
    convert: bool
    dtype: np.dtype | None


NOT_YET = object()  # a FieldConverter whose annotation has not been resolved yet
_NOT_YET_PICKLED = "arrayfield: annotation not resolved yet"  # NOT_YET, pickled


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
        "fast_dtypes",
        "name",
        "owner",
        "resolved",
        "spec",
        "unresolved",
        "user_converter",
    )

    def __init__(
        self,
        *,
        dtype: np.dtype | None = None,
        user_converter: Callable[[Any], Any] | None = None,
    ):
        # Which field of which class: set by `bind`, once the class exists.
        self.owner: type | None = None
        self.name: str | None = None
        self.annotation: Any = Any
        self.dtype = dtype
        self.user_converter = user_converter
        self.unresolved = ""  # why the annotation could not be resolved, if so
        self.spec: FieldSpec | object | None = NOT_YET
        self.resolved: Any = None  # the annotation as an object, once resolved
        # The dtypes a strong, concrete JAX array may have to be kept without a call
        # into _convert: None for any; empty (always call) until resolved.
        self.fast_dtypes: frozenset[np.dtype] | None = frozenset()
        self._lock = threading.Lock()
        self.__signature__ = _signature(Any)

    # -- pickling ---------------------------------------------------------------
    # A class defined in `__main__` or in a function is pickled by value
    # (cloudpickle, for Dask, Ray or loky workers), its converters with it. A lock
    # cannot be pickled, and `NOT_YET` must stay this process's sentinel.

    def __getstate__(self) -> dict[str, Any]:
        state = {name: getattr(self, name) for name in self.__slots__}
        del state["_lock"]
        if state["spec"] is NOT_YET:
            state["spec"] = _NOT_YET_PICKLED
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
        if type(self.spec) is str:  # _NOT_YET_PICKLED
            self.spec = NOT_YET
        self._lock = threading.Lock()

    # -- resolution -------------------------------------------------------------

    def bind(
        self,
        owner: type,
        name: str,
        annotation: Any,
        default: Any = dataclasses.MISSING,
    ) -> None:
        """Attach to `owner.name`; resolve the annotation now if it can be.

        `default`, the field's default if it has one, only for error messages.
        """
        self.owner, self.name, self.annotation = owner, name, annotation
        self.spec = NOT_YET
        try:
            resolved = resolve_annotation(annotation, owner)
        except Unresolved:
            first_param = annotation  # keep the string; beartype resolves it later
        else:
            spec = self._set_spec(resolved, default)
            first_param = annotation if spec is None else init_annotation(resolved)
        if self.user_converter is not None:
            first_param = _first_parameter_annotation(self.user_converter)
        self.__signature__ = _signature(first_param)

    def _set_spec(
        self, resolved: Any, default: Any = dataclasses.MISSING
    ) -> FieldSpec | None:
        self.resolved = resolved
        if any(member is BareField for member in union_members(resolved)):
            stored = ""
            if default is not dataclasses.MISSING:
                stored = f", and its default {short_repr(default)} would stay as it is"
            raise ConversionError(
                f"{self.where}: annotated af.Field with nothing inside, which names "
                f"no type, so arrayfield cannot tell whether to store an array{stored}."
                ' Write the annotation inside: af.Field[Float[Array, ""]] '
                "(af.Field[T] is T at runtime)."
            )
        spec = field_spec(resolved)
        if spec is None and self.dtype is not None:
            raise ConversionError(
                f"{self.where}: af.field(dtype={self.dtype.name!r}) stores an array, "
                f"but the annotation {format_annotation(self.annotation)} does not "
                "denote an array. Annotate the field as an array (e.g. "
                'Float[Array, ""]), or drop dtype= to keep the value as it is.'
            )
        if spec is not None and self.dtype is not None:
            spec = spec.with_dtype(self.dtype)
        if type(spec) is ArraySpec:
            self.fast_dtypes = None if spec.dtypes is None else dtype_set(spec.dtypes)
        self.spec = spec
        return spec

    def resolved_spec(self) -> FieldSpec | None:
        """The field's spec, resolving a forward reference on first use."""
        spec = self.spec
        if spec is not NOT_YET:
            return spec  # type: ignore[return-value]
        with self._lock:
            if self.spec is not NOT_YET:
                return self.spec  # type: ignore[return-value]
            try:
                return self._set_spec(resolve_annotation(self.annotation, self.owner))
            except Unresolved as error:
                # Often a non-array type imported only under TYPE_CHECKING: say so
                # only when a value arrives that conversion would have changed.
                self.unresolved = str(error)
                self.spec = None
                return None

    @property
    def where(self) -> str:
        return self.where_in(self.owner)

    def where_in(self, cls: type | None) -> str:
        """`Class.field` for messages; `Outer.Inner`, without `f.<locals>.`."""
        owner = "<unbound>" if cls is None else class_name(cls)
        return f"{owner}.{self.name}"

    # -- conversion -------------------------------------------------------------

    def __call__(self, value: Any) -> Any:
        """What equinox calls after `__init__`: the user's converter, then ours.

        Once per field of every instance: a concrete JAX array whose dtype is
        already right is returned before any other call.
        """
        if self.user_converter is not None:
            value = self.user_converter(value)
        if type(value) is _facts.array_class:
            # `.aval.dtype` costs about half of `.dtype`.
            fast = self.fast_dtypes
            if fast is None or value.aval.dtype in fast:
                return value
        return self.store(value)

    def store(self, value: Any, cls: type | None = None) -> Any:
        """What the field stores for `value`: our conversion alone, no user converter.

        The hot path: one call layer short of `to_array` once the spec is resolved.
        It is also what `normalize` re-runs.

        `cls`, the class being instantiated, names the field in errors (the owner,
        the class that declared it, otherwise).
        """
        spec = self.spec
        if type(spec) is not ArraySpec:
            return self._store_resolving(value, cls)
        try:
            return to_array(value, spec)
        except Rejected as reason:
            raise self._error(value, reason, cls) from None

    def _store_resolving(self, value: Any, cls: type | None) -> Any:
        """`store` for a spec not yet resolved, a container spec, or no spec."""
        spec = self.spec
        if spec is NOT_YET:
            spec = self.resolved_spec()
        if spec is None:
            if self.unresolved and looks_numeric(value):
                warn_in_user_code(
                    AnnotationWarning(
                        f"{self.where_in(cls or self.owner)}: cannot resolve the "
                        f"annotation {self.annotation!r} ({self.unresolved}), so a "
                        f"{type(value).__name__} is stored as it is, not converted. "
                        "Import the names it uses at runtime (not only under "
                        "TYPE_CHECKING), or opt the field out with "
                        "af.field(convert=False)."
                    )
                )
            return value
        try:
            return to_field_value(value, spec)  # type: ignore[arg-type]
        except Rejected as reason:
            raise self._error(value, reason, cls) from None

    def _error(self, value: Any, reason: Rejected, cls: type | None) -> ConversionError:
        fix = ""
        if not looks_numeric(value) and not isinstance(value, jax.Array):
            # not array data at all: say what would be
            fix = (
                " Pass a number, an array or a nested list of numbers; if the field "
                "holds something else, annotate it with that type, or opt it out "
                "with af.field(convert=False)."
            )
        return ConversionError(
            f"{self.where_in(cls or self.owner)}: cannot store {value_repr(value)} "
            f"({type_label(value)}) in a field annotated "
            f"{format_annotation(self.annotation)}: {reason}.{fix}"
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
        mistake = self.metadata.get(_MISTAKE_KEY)
        if mistake is not None:
            error_type, message = mistake
            where = f"{class_name(owner)}.{name}"
            _raise_on_lookup(owner, name, error_type(f"{where}: {message}"))
            return
        converter = self.metadata.get("converter")
        if isinstance(converter, FieldConverter) and converter.owner is None:
            annotation = inspect.get_annotations(owner).get(name, Any)
            try:
                converter.bind(owner, name, annotation, self.default)
            except ConversionError as error:
                _raise_on_lookup(owner, name, error)


def _raise_on_lookup(owner: type, name: str, error: Exception) -> None:
    """Raise `error` while `owner` is created, on every Python.

    Python < 3.12 wraps an error raised in `__set_name__` in a RuntimeError. Raise
    it a moment later instead, still while the class is created: dataclasses looks
    the field's default up on the class.
    """
    type.__setattr__(owner, name, RaiseOnLookup(type(error), str(error)))


class RaiseOnLookup:
    """Stands in for a wrongly declared field: looking it up raises the error."""

    __slots__ = ("error_type", "message")

    def __init__(self, error_type: type[Exception], message: str):
        self.error_type = error_type
        self.message = message

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        raise self.error_type(self.message)


# Key under which a wrongly called `af.field` records its mistake, reported with the
# class and field names once the class statement names them (`_ArrayField`).
_MISTAKE_KEY = "arrayfield mistake"


def _mistake(
    args: tuple[Any, ...], kwargs: dict[str, Any], convert: bool, dtype: Any
) -> tuple[type[Exception], str] | None:
    """The error a wrong `af.field(...)` call raises, without its `Class.field`."""
    if args:
        shown = ", ".join(short_repr(a) for a in args)
        hint = f"af.field(default={short_repr(args[0])})"
        if callable(args[0]):
            hint += f" for a default value, or default_factory={short_repr(args[0])}"
        return TypeError, (
            f"af.field({shown}): af.field takes keyword arguments only. Write {hint}."
        )
    if dtype is not None and (not convert or kwargs.get("static", False)):
        given = "static=True" if kwargs.get("static", False) else "convert=False"
        return TypeError, (
            f"af.field(dtype={dtype!r}, {given}): dtype= converts the field to an "
            f"array, which a field with {given} never is; af.field(dtype=...) cannot "
            f"be combined with convert=False or static=True. Drop {given} to store "
            "an array of that dtype, or drop dtype= to store the value as it is."
        )
    default = kwargs.get("default", dataclasses.MISSING)
    if default is not dataclasses.MISSING and type(default).__hash__ is None:
        # dataclasses refuses it too, without naming the class.
        shown = short_repr(default)
        if isinstance(default, (list, dict, set)):
            fix = f"default_factory=lambda: {shown}"
        else:  # an array: its short form is not code
            fix = "default_factory= with a function that builds a new one"
        if isinstance(default, list):
            as_tuple = short_repr(tuple(default))
            fix = f"default={as_tuple} (converted as the list would be), or {fix}"
        return ValueError, (
            f"af.field(default={shown}): a default of type {type(default).__name__} "
            "would be one object shared by every instance, which dataclasses "
            f"refuses. Write {fix}."
        )
    return None


def _in_class_body(depth: int) -> bool:
    """Whether the caller `depth` frames up is a class statement's body."""
    namespace = sys._getframe(depth + 1).f_locals
    return "__qualname__" in namespace and "__module__" in namespace


def _mistaken_field(error_type: type[Exception], message: str) -> Any:
    """A field that reports `message` with its class and name (`_ArrayField`)."""
    result = dataclasses.field(metadata={_MISTAKE_KEY: (error_type, message)})
    result.__class__ = _ArrayField
    return result


def field(
    # None are valid (a default is `default=`): typed so that checkers flag one,
    # taken so that the error can say what to write.
    *args: NoReturn,
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

    `TypeError` for a positional argument (a default is `default=...`), if `dtype`
    is given together with `convert=False` or `static=True`, or for a keyword
    neither `af.field` nor `eqx.field` takes; `ValueError` for a default that
    would be shared by every instance (a list: write a tuple, or
    `default_factory=`); `af.ConversionError` if NumPy does not understand
    `dtype`, and when the class is created if `dtype` is given for a field whose
    annotation does not denote an array. In a class body, the positional,
    `dtype`-and-static and shared-default errors are raised by the class
    statement, naming `Class.field`.

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
    unknown = kwargs.keys() - _EQX_FIELD_KEYWORDS
    if unknown:
        name = min(unknown)
        raise TypeError(
            f"af.field() got an unexpected keyword argument {name!r}."
            f"{did_you_mean(name, ['convert', 'dtype', *_EQX_FIELD_KEYWORDS])} "
            "It takes convert= and dtype=, and passes eqx.field's keywords on."
        )
    mistake = _mistake(args, kwargs, convert, dtype)
    if mistake is not None:
        error_type, message = mistake
        if not _in_class_body(1):
            raise error_type(message)
        return _mistaken_field(error_type, message)  # the class statement raises
    np_dtype = None if dtype is None else _field_dtype(dtype)
    static = kwargs.get("static", False)
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata[OPTIONS_KEY] = FieldOptions(convert=convert, dtype=np_dtype)
    if not convert or static:
        return eqx.field(metadata=metadata, **kwargs)
    converter = FieldConverter(
        dtype=np_dtype, user_converter=kwargs.pop("converter", None)
    )
    result = eqx.field(converter=converter, metadata=metadata, **kwargs)
    result.__class__ = _ArrayField
    return result


# What af.field passes on: eqx.field's own keywords and those of dataclasses.field,
# to which eqx.field passes the rest.
_EQX_FIELD_KEYWORDS = frozenset(
    name
    for function in (eqx.field, dataclasses.field)
    for name, parameter in inspect.signature(function).parameters.items()
    if parameter.kind is not inspect.Parameter.VAR_KEYWORD
)


def _field_dtype(dtype: Any) -> np.dtype:
    try:
        return np.dtype(dtype)
    except TypeError:
        names = [name for name in np.sctypeDict if isinstance(name, str)]
        hint = did_you_mean(str(dtype), names) if isinstance(dtype, str) else ""
        raise ConversionError(
            f"af.field(dtype={dtype!r}): NumPy does not understand this dtype."
            f"{hint} Pass a dtype such as jnp.float32 or 'float32'."
        ) from None
