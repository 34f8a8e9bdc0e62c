"""An ArrayModule class's fields: which of them get a `FieldConverter` while the
class is created (`declare_array_fields`), and `field_converters(cls)`, the table
validation, `normalize` and the diagnostics read: every field of `cls` that
arrayfield converts, with its converter.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any

from ._field import OPTIONS_KEY, FieldConverter, RaiseOnLookup
from ._spec import Unresolved, resolve_annotation

VALIDATES = "__arrayfield_validates__"

# What a class body may annotate without declaring a dataclass field (dataclasses'
# and equinox's markers), read off an annotation arrayfield cannot resolve yet.
_NOT_FIELDS = frozenset(
    {"ClassVar", "InitVar", "KW_ONLY", "AbstractVar", "AbstractClassVar"}
)


def declare_array_fields(cls: type) -> None:
    """Give every array field of a new ArrayModule class an arrayfield converter.

    Runs from `ArrayModule.__init_subclass__`, while `type.__new__` builds the class
    and before equinox makes it a dataclass: each array-annotated name of the class
    body becomes `eqx.field(converter=...)` (its default, and any converter or
    option written there, kept), so equinox's own converter hook stores the
    converted value once the class's `__init__` (any `__init__`) has returned,
    before any `__check_init__` runs. A field a plain `eqx.Module` base declared is
    declared again here, as it was, with a converter. Static fields, fields opted
    out with `af.field(convert=False)`, `af.field(...)` fields (which convert
    already) and non-array annotations are left exactly as written.
    """
    own = inspect.get_annotations(cls)
    for name, annotation in own.items():
        value = cls.__dict__.get(name, dataclasses.MISSING)
        declared = _with_converter(cls, name, annotation, value)
        if declared is not None:
            type.__setattr__(cls, name, declared)
    for name, (inherited, owner) in _inherited_fields(cls).items():
        if name in own:
            continue
        converter = inherited.metadata.get("converter")
        if name in cls.__dict__:
            if isinstance(converter, FieldConverter) and inspect.isdatadescriptor(
                cls.__dict__[name]
            ):
                declared = _without_converter(inherited, cls.__dict__[name])
            else:
                continue  # a value that replaces the field: nothing to convert
        elif isinstance(converter, FieldConverter):
            continue  # an ArrayModule base or af.field converts it already
        else:
            declared = _with_converter(owner, name, inherited.type, inherited)
        if declared is not None:
            # Set, not updated: `cls.__annotations__` of a class whose body
            # annotated nothing is a dict the class does not keep.
            annotations = {**inspect.get_annotations(cls), name: inherited.type}
            type.__setattr__(cls, "__annotations__", annotations)
            type.__setattr__(cls, name, declared)


def _inherited_fields(cls: type) -> dict[str, tuple[dataclasses.Field, type]]:
    """The dataclass fields `cls` inherits, each with the class whose body declared
    it (dataclasses hand an inherited field object down unchanged)."""
    fields: dict[str, tuple[dataclasses.Field, type]] = {}
    for base in reversed(cls.__mro__[1:]):
        if "__dataclass_fields__" not in base.__dict__:
            continue
        for f in dataclasses.fields(base):
            known = fields.get(f.name)
            fields[f.name] = (f, known[1] if known and known[0] is f else base)
    return fields


def _with_converter(
    owner: type, name: str, annotation: Any, value: Any
) -> dataclasses.Field | None:
    """The field `name`, declared in `owner`'s body as `annotation` = `value`,
    declared again with an arrayfield converter, or None to leave it as it is."""
    if isinstance(value, dataclasses.Field):
        metadata = value.metadata
        options = metadata.get(OPTIONS_KEY)
        user_converter = metadata.get("converter")
        if (
            metadata.get("static", False)
            or (options is not None and not options.convert)
            or isinstance(user_converter, FieldConverter)
        ):
            return None
        default = value.default
    elif inspect.isdatadescriptor(value) or type(value) is RaiseOnLookup:
        # A property under an annotation stores nothing; a mistaken `af.field`
        # raises its error when dataclasses look the default up.
        return None
    else:
        user_converter, default = None, value
    if _names_no_field(annotation, owner):
        return None
    converter = FieldConverter(user_converter=user_converter)
    converter.bind(owner, name, annotation, default)
    if converter.spec is None:
        return None
    if isinstance(value, dataclasses.Field):
        declared = copy.copy(value)
    elif value is dataclasses.MISSING:
        declared = dataclasses.field()
    else:
        declared = dataclasses.field(default=value)
    # Not in a MappingProxyType, as dataclasses wrap metadata: a proxy pickles as
    # `dict(proxy)` (cloudpickle, a class pickled by value), which would drop it.
    declared.metadata = _WithConverter(declared.metadata, converter)  # pyright: ignore
    return declared


class _WithConverter(dict):
    """A field's metadata as its class body wrote it, with the converter
    arrayfield declared: equinox reads `metadata["converter"]` (or `.get`), while
    iteration, `len`, `==` and `repr` show what the class body wrote (as equinox's
    own tests compare a field's metadata with what they wrote). A converter the
    body wrote is listed under its key, and `["converter"]` gives arrayfield's,
    which runs it first.

    A `dict`, so that equinox's lookups on every instance take dict's C methods;
    whatever lists the items is overridden to leave the declared converter out.
    """

    __slots__ = ("listed",)

    def __init__(self, written: Mapping[str, Any], converter: FieldConverter):
        super().__init__(written)
        self.listed = "converter" in written  # a converter the body wrote
        dict.__setitem__(self, "converter", converter)

    def written(self) -> dict[str, Any]:
        """The metadata as the class body wrote it."""
        if self.listed:
            return dict(dict.items(self))
        return {k: v for k, v in dict.items(self) if k != "converter"}

    def __iter__(self) -> Iterator[str]:
        return iter(self.written())

    def __len__(self) -> int:
        return dict.__len__(self) - (not self.listed)

    def keys(self) -> Any:
        return self.written().keys()

    def items(self) -> Any:
        return self.written().items()

    def values(self) -> Any:
        return self.written().values()

    def __eq__(self, other: object) -> bool:
        written = self.written()
        return written == (other.written() if type(other) is _WithConverter else other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self.written())

    def __reduce__(self) -> tuple:
        return (_WithConverter, (self.written(), self["converter"]))

    def __setitem__(self, key: str, value: Any) -> None:
        raise TypeError("a field's metadata is read-only")

    def __delitem__(self, key: str) -> None:
        raise TypeError("a field's metadata is read-only")


def _names_no_field(annotation: Any, owner: type) -> bool:
    """Whether a class body's annotation is a `ClassVar`, `InitVar`, `KW_ONLY` or
    equinox's `AbstractVar`/`AbstractClassVar`: no field that holds a value."""
    if isinstance(annotation, str):
        head = annotation.strip().split("[", 1)[0].rsplit(".", 1)[-1].strip()
        if head in _NOT_FIELDS:
            return True
        try:
            annotation = resolve_annotation(annotation, owner)
        except Unresolved:
            return False
    if annotation is dataclasses.KW_ONLY or isinstance(annotation, dataclasses.InitVar):
        return True
    origin = typing.get_origin(annotation)
    return origin is typing.ClassVar or getattr(origin, "__name__", "") in _NOT_FIELDS


def _without_converter(
    inherited: dataclasses.Field, descriptor: Any
) -> dataclasses.Field:
    """The inherited field again, with no arrayfield converter, for a class in
    which a property replaces it.

    equinox allows that (the property is read, nothing is stored), but it stores
    what a field's converter returns, which a property cannot take. The field keeps
    the property as its default: dataclasses put it back on the class.
    """
    declared = copy.copy(inherited)
    converter = inherited.metadata["converter"]
    metadata = {k: v for k, v in inherited.metadata.items() if k != "converter"}
    if converter.user_converter is not None:
        metadata["converter"] = converter.user_converter
    declared.metadata = types.MappingProxyType(metadata)
    declared.default, declared.default_factory = descriptor, dataclasses.MISSING
    return declared


def field_converters(cls: type) -> dict[str, FieldConverter]:
    """Every field of `cls` that arrayfield converts, with its converter.

    The array fields of an `ArrayModule`, and `af.field(...)` fields of any Module.
    What `normalize`, validation and diagnostics read.
    """
    converters = {}
    for f in dataclasses.fields(cls):  # pyright: ignore[reportArgumentType]
        converter = f.metadata.get("converter")
        if isinstance(converter, FieldConverter):
            converters[f.name] = converter
    return converters
