"""`ArrayModule`, `field` and `normalize`: the one place that touches equinox's classes.

Two of equinox's own hooks do the work, both run after *any* `__init__` (dataclass
or custom):

- `__check_init__`: an `ArrayModule` class converts all its array fields in one pass
  there, before the `__check_init__` of any class in its hierarchy runs. One pass is
  cheaper than a converter per field (equinox's converter hook alone costs more per
  field than an already-right array needs).
- field converters: `af.field` attaches a `FieldConverter` to one field, which is
  how it opts single fields of plain `eqx.Module`s in. Converters a user wrote run
  before either.

Annotations are parsed once per class, when the class is created (or on first use
for forward references), never per instance.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # equinox depends on typing_extensions, so it is there
    from typing_extensions import dataclass_transform

import equinox as eqx
import jax
import numpy as np

from ._convert import (
    CONCRETE_ARRAY_TYPES,
    Rejected,
    convert,
    dtype_set,
    is_module,
    looks_numeric,
    to_array,
)
from ._errors import (
    AnnotationWarning,
    ConversionError,
    class_name,
    format_annotation,
    short_repr,
    warn_in_user_code,
)
from ._spec import (
    ArraySpec,
    FieldSpec,
    Unresolved,
    field_spec,
    init_annotation,
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
        self.spec: FieldSpec | object | None = _NOT_YET
        self.resolved: Any = None  # the annotation as an object, once resolved
        # The dtypes a strong, concrete JAX array may have to be kept without a call
        # into _convert: None for any; empty (always call) until resolved.
        self.fast_dtypes: frozenset[np.dtype] | None = frozenset()
        self._lock = threading.Lock()
        self.__signature__ = _signature(Any)

    # -- resolution -------------------------------------------------------------

    def bind(self, owner: type, name: str, annotation: Any) -> None:
        """Attach to `owner.name`; resolve the annotation now if it can be."""
        self.owner, self.name, self.annotation = owner, name, annotation
        self.spec = _NOT_YET
        try:
            resolved = resolve_annotation(annotation, owner)
        except Unresolved:
            first_param = annotation  # keep the string; beartype resolves it later
        else:
            spec = self._set_spec(resolved)
            first_param = annotation if spec is None else init_annotation(resolved)
        if self.user_converter is not None:
            first_param = _first_parameter_annotation(self.user_converter)
        self.__signature__ = _signature(first_param)

    def _set_spec(self, resolved: Any) -> FieldSpec | None:
        self.resolved = resolved
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
        if spec is not _NOT_YET:
            return spec  # type: ignore[return-value]
        with self._lock:
            if self.spec is not _NOT_YET:
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
        """What equinox calls for an `af.field`: the user's converter, then ours."""
        if self.user_converter is not None:
            value = self.user_converter(value)
        return self.convert(value)

    def convert(self, value: Any, cls: type | None = None) -> Any:
        """`to_array`, one call layer shorter once the spec is resolved (hot path).

        `cls`, the class being instantiated, names the field in errors (the owner,
        the class that declared it, otherwise).
        """
        spec = self.spec
        if type(spec) is not ArraySpec:
            return self.to_array(value, cls)
        try:
            return to_array(value, spec)
        except Rejected as reason:
            raise self._error(value, reason, cls) from None

    def to_array(self, value: Any, cls: type | None = None) -> Any:
        """Our conversion alone (no user converter): what `normalize` re-runs."""
        spec = self.spec
        if spec is _NOT_YET:
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
            return convert(value, spec)  # type: ignore[arg-type]
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
            f"{self.where_in(cls or self.owner)}: cannot store {short_repr(value)} "
            f"({type(value).__name__}) in a field annotated "
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
        converter = self.metadata.get("converter")
        if isinstance(converter, FieldConverter) and converter.owner is None:
            annotation = inspect.get_annotations(owner).get(name, Any)
            try:
                converter.bind(owner, name, annotation)
            except ConversionError as error:
                # Python < 3.12 wraps an error raised here in a RuntimeError. Raise
                # it a moment later instead, still while the class is created:
                # dataclasses looks the field's default up on the class.
                type.__setattr__(owner, name, _RaiseOnLookup(str(error)))


class _RaiseOnLookup:
    """Stands in for a wrongly declared field: looking it up raises the error."""

    __slots__ = ("message",)

    def __init__(self, message: str):
        self.message = message

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        raise ConversionError(self.message)


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

    `TypeError` if `dtype` is given together with `convert=False` or `static=True`,
    or for a keyword neither `af.field` nor `eqx.field` takes; `af.ConversionError`
    if NumPy does not understand `dtype`, and when the class is created if `dtype`
    is given for a field whose annotation does not denote an array.

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
            f"{_did_you_mean(name, ['convert', 'dtype', *_EQX_FIELD_KEYWORDS])} "
            "It takes convert= and dtype=, and passes eqx.field's keywords on."
        )
    np_dtype = None if dtype is None else _field_dtype(dtype)
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


def _did_you_mean(name: str, candidates: Any) -> str:
    """` Did you mean 'check'?`, or nothing when no candidate is close."""
    close = difflib.get_close_matches(name, sorted(candidates), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def _field_dtype(dtype: Any) -> np.dtype:
    try:
        return np.dtype(dtype)
    except TypeError:
        names = [name for name in np.sctypeDict if isinstance(name, str)]
        hint = _did_you_mean(str(dtype), names) if isinstance(dtype, str) else ""
        raise ConversionError(
            f"af.field(dtype={dtype!r}): NumPy does not understand this dtype."
            f"{hint} Pass a dtype such as jnp.float32 or 'float32'."
        ) from None


# -- ArrayModule ----------------------------------------------------------------


# Where an ArrayModule class keeps its converters: name -> FieldConverter, for the
# fields it converts in one pass. Computed once, when the class is created.
_CONVERTERS = "__arrayfield_converters__"
_VALIDATES = "__arrayfield_validates__"


def _declaring_class(cls: type, f: dataclasses.Field) -> type:
    """The class whose body declared field `f`: its annotation's namespace.

    Dataclasses hand an inherited field object down unchanged, so that is the most
    basic class in the MRO that holds this very object.
    """
    for klass in reversed(cls.__mro__):
        if klass.__dict__.get("__dataclass_fields__", {}).get(f.name) is f:
            return klass
    return cls


def _inherited_converter(cls: type, f: dataclasses.Field) -> FieldConverter | None:
    """The converter a base made for this very field object, if any (no re-parsing)."""
    for base in cls.__mro__[1:]:
        converters = base.__dict__.get(_CONVERTERS)
        if converters is not None and f.name in converters:
            if base.__dict__["__dataclass_fields__"].get(f.name) is f:
                return converters[f.name]
            return None
    return None


def _batch_converters(cls: type) -> dict[str, FieldConverter]:
    """The fields of a new ArrayModule class that it converts itself, in one pass.

    Every dataclass field counts, whichever base declared it (plain `eqx.Module`
    parents included), except static ones, ones opted out with
    `af.field(convert=False)`, ones an `af.field` converter already handles, and ones
    whose annotation does not denote an array.
    """
    converters = {}
    for f in dataclasses.fields(cls):  # pyright: ignore[reportArgumentType]
        metadata = f.metadata
        if metadata.get("static", False):
            continue
        options = metadata.get(_OPTIONS_KEY)
        if options is not None and not options.convert:
            continue
        if isinstance(metadata.get("converter"), FieldConverter):
            continue  # af.field(...): converted by equinox's converter hook
        if inspect.isdatadescriptor(inspect.getattr_static(cls, f.name, None)):
            continue  # a subclass property overrides the field: nothing is stored
        converter = _inherited_converter(cls, f)
        if converter is None:
            owner = _declaring_class(cls, f)
            converter = FieldConverter()
            converter.bind(owner, f.name, f.type)
        if converter.spec is not None:
            converters[f.name] = converter
    return converters


def _widen_init_annotations(cls: type, converters: dict[str, FieldConverter]) -> None:
    """Let jaxtyping/beartype-checked `__init__`s accept scalars for array fields.

    What equinox does for a converter's first-parameter annotation, done for the
    fields converted in one pass. Fields with a converter of their own keep the
    annotation equinox gave them.
    """
    annotations = cls.__init__.__annotations__
    for name, converter in converters.items():
        if name not in annotations or converter.spec is _NOT_YET:
            continue
        if cls.__dataclass_fields__[name].metadata.get("converter") is None:
            annotations[name] = converter.__signature__.parameters["value"].annotation


def _make_check_init(
    cls: type,
    converters: dict[str, FieldConverter],
    validates: bool,
    own_check: Callable[[Any], None] | None,
):
    """`cls.__check_init__`: convert (and validate) once, then the class's own check.

    Equinox calls the `__check_init__` of every class in the MRO, most derived first,
    after `__init__` and after field converters: so the most derived class converts
    every field, and each class's own check already sees arrays.
    """
    fields = tuple(converters.items())
    concrete_types = CONCRETE_ARRAY_TYPES  # a closure cell: cheaper than a global

    def __check_init__(self):
        if type(self) is cls:
            values = self.__dict__
            for name, converter in fields:
                try:
                    value = values[name]
                except KeyError:  # a custom __init__ left it to the class default
                    value = getattr(self, name)
                if type(value) in concrete_types:
                    # Inlined: the common case of an array that is already right.
                    # `.aval.dtype` is about half the cost of `.dtype`.
                    fast = converter.fast_dtypes
                    if fast is None or value.aval.dtype in fast:
                        continue
                new = converter.convert(value, cls)
                if new is not value:
                    object.__setattr__(self, name, new)
            if validates:
                validate(self)
        if own_check is not None:
            own_check(self)

    __check_init__.__qualname__ = f"{cls.__qualname__}.__check_init__"
    return __check_init__


def _linearize(bases: tuple[type, ...]) -> list[type] | None:
    """The MRO a class with these bases will get, without the class itself (C3).

    None if there is none: creating the class then raises Python's own error.
    """
    sequences = [list(base.__mro__) for base in bases] + [list(bases)]
    order: list[type] = []
    while True:
        sequences = [sequence for sequence in sequences if sequence]
        if not sequences:
            return order
        for sequence in sequences:
            head = sequence[0]
            if not any(head in other[1:] for other in sequences):
                break
        else:
            return None
        order.append(head)
        for sequence in sequences:
            if sequence[0] is head:
                del sequence[0]


def _init_behind_array_module(bases: tuple[type, ...]) -> Callable | None:
    """The custom `__init__` that `class C(af.ArrayModule, eqx.nn.Linear)` would lose.

    Equinox gives a class without an `__init__` of its own a dataclass `__init__`
    if the first Module in its MRO has one, and with `ArrayModule` listed first
    that is `ArrayModule`, whose (empty) dataclass `__init__` would also come
    before the layer's in the MRO. `ArrayModule` adds no fields, so decide as if it
    were not there: return the `__init__` the class should have, or None if the
    dataclass one is right.
    """
    if len(bases) < 2:
        return None  # the one base decides, as for any Module
    array_module = globals().get("ArrayModule")  # None while creating it
    mro = _linearize(bases)
    if array_module is None or mro is None:
        return None
    # The classes equinox asks, in order (object last, never asked).
    asked = [
        klass
        for klass in mro[:-1]
        if issubclass(klass, eqx.Module) or klass.__init__ is not object.__init__
    ]
    if len(asked) < 2 or asked[0] is not array_module:
        return None
    behind = asked[1]
    if issubclass(behind, eqx.Module) and behind.__dataclass_params__.init:  # pyright: ignore[reportAttributeAccessIssue]
        return None
    for klass in mro:
        if klass is not array_module and "__init__" in klass.__dict__:
            return klass.__dict__["__init__"]
    return None


# Static checkers read dataclass semantics off the metaclass; say it again for ours.
@dataclass_transform(field_specifiers=(dataclasses.field, eqx.field, field))
class _ArrayModuleMeta(type(eqx.Module)):
    """Equinox's metaclass, plus one step once the dataclass exists.

    `type(eqx.Module)` is equinox's public class object, not a private name.
    """

    def __new__(mcs, name, bases, namespace, **kwargs):
        if "__init__" not in namespace:
            shadowed = _init_behind_array_module(bases)
            if shadowed is not None:
                namespace = {**namespace, "__init__": shadowed}
        cls = super().__new__(mcs, name, bases, namespace, **kwargs)
        converters = _batch_converters(cls)
        setattr(cls, _CONVERTERS, converters)
        # A dataclass-made __init__ is in the class dict though not in its body.
        if "__init__" in cls.__dict__ and "__init__" not in namespace:
            _widen_init_annotations(cls, converters)
        validates = getattr(cls, _VALIDATES, False)
        # A class with nothing to convert or validate needs no hook: its parents'
        # hooks skip instances of subclasses (`type(self) is cls`), so nothing is lost.
        if converters or validates:
            own_check = cls.__dict__.get("__check_init__")
            hook = _make_check_init(cls, converters, validates, own_check)
            type.__setattr__(cls, "__check_init__", hook)
        return cls


class ArrayModule(eqx.Module, metaclass=_ArrayModuleMeta):
    """`eqx.Module`, with array-annotated fields stored as strongly typed arrays.

    Subclass it instead of `eqx.Module`. After any `__init__` (the dataclass one or
    your own) and before any `__check_init__` you wrote (the conversion itself runs
    in equinox's `__check_init__` hook), each field whose annotation denotes an
    array (`jax.Array`, `np.ndarray`, jaxtyping's `Float[Array, "n"]` and friends,
    also inside `Optional`/`Union`/`Annotated`, and containers of them such as
    `list[Float[Array, ""]]`) is converted. The annotation is the contract:

    - A value of a type the union names besides arrays is stored as it is: `1` in
      an `int | Array` field, `0.5` in `jax.typing.ArrayLike`, a Module in
      `Module | Array`.
    - Python and NumPy scalars, NumPy arrays and nested lists of numbers become an
      array of the annotated type (JAX for JAX annotations, NumPy for `np.ndarray`,
      with NumPy's dtypes), strongly typed, with the dtype the annotation asks for.
    - A JAX array or tracer with an allowed dtype is kept as is (same object, weak
      stays weak).
    - `None`, `jax.ShapeDtypeStruct` and pytrees that are not arrays (equinox's
      loop buffers, quax-style values) are stored unchanged.
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

    def __check_init__(self):
        # A no-op on purpose: equinox looks `__check_init__` up in the dict of every
        # class in the MRO, and a miss (a raised KeyError) costs more than this call.
        pass

    def __init_subclass__(cls, *, check: bool | None = None, **kwargs: Any):
        if kwargs:
            _reject_unknown_class_keywords(cls, kwargs)
        super().__init_subclass__(**kwargs)
        if check if check is not None else enabled_by_environment():
            setattr(cls, _VALIDATES, True)  # inherited: subclasses validate too
        elif check is False:
            setattr(cls, _VALIDATES, False)


def _reject_unknown_class_keywords(cls: type, kwargs: dict[str, Any]) -> None:
    """Name a misspelled `class C(af.ArrayModule, chek=True)` keyword.

    Left alone when a base after `ArrayModule` in the MRO takes class keywords of
    its own (an `__init_subclass__` other than `object`'s).
    """
    mro = cls.__mro__
    for klass in mro[mro.index(ArrayModule) + 1 :]:
        if "__init_subclass__" in klass.__dict__:
            if klass is not object:
                return
            break
    name = min(kwargs)
    raise TypeError(
        f"{class_name(cls)}: unknown class keyword {name}={kwargs[name]!r}."
        f"{_did_you_mean(name, ['check', 'strict', 'is_abstract'])} "
        "An ArrayModule subclass takes check=True/False (validation against the "
        "annotations) and equinox's strict= and is_abstract=."
    )


def field_converters(cls: type) -> dict[str, FieldConverter]:
    """Every field of `cls` that arrayfield converts, with its converter.

    The fields an `ArrayModule` converts in one pass, and those with an `af.field`
    converter (on any Module). What `normalize`, validation and diagnostics read.
    """
    converters = dict(cls.__dict__.get(_CONVERTERS, {}))
    for f in dataclasses.fields(cls):  # pyright: ignore[reportArgumentType]
        converter = f.metadata.get("converter")
        if isinstance(converter, FieldConverter):
            converters[f.name] = converter
    return converters


# -- normalize --------------------------------------------------------------------

_T = TypeVar("_T")


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
    nodes, treedef = jax.tree_util.tree_flatten(tree, is_leaf=is_module)
    normalized = [_normalize_node(node) for node in nodes]
    if all(new is old for new, old in zip(normalized, nodes, strict=True)):
        return tree  # nothing changed: keep every container, not a rebuilt copy
    return jax.tree_util.tree_unflatten(treedef, normalized)


def _normalize_node(node: Any) -> Any:
    if not is_module(node):
        return node
    converters = field_converters(type(node))
    updates = {}
    for f in dataclasses.fields(node):
        old = node.__dict__.get(f.name, dataclasses.MISSING)
        if old is dataclasses.MISSING or f.metadata.get("static", False):
            continue
        new = normalize(old)
        converter = converters.get(f.name)
        if converter is not None:
            new = converter.to_array(new)
        if new is not old:
            updates[f.name] = new
    if not updates:
        return node
    rebuilt = object.__new__(type(node))
    for key, value in {**node.__dict__, **updates}.items():
        object.__setattr__(rebuilt, key, value)
    return rebuilt
