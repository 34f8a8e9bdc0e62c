"""`ArrayModule`: equinox's Module with its array fields converted in one pass.

An `ArrayModule` class converts all its array fields right after its `__init__`
(the dataclass one or a custom one) returns: `_finish_class` wraps the class's
`__init__`. Equinox then runs field converters and every `__check_init__` in the
MRO, which already see arrays. The conversion adds no `__check_init__` to the
MRO, so code that walks the hooks equinox will call (quax's fast construction
path counts them) sees a subclass exactly as it sees an `eqx.Module` one. One pass
is cheaper than a converter per field (equinox's converter hook alone costs more
per field than an already-right array needs). Fields declared with
`af.field(...)` keep the converter of their own (`_field.py`), and converters a
user wrote run before either. Validation (`check=True`) needs every field
converted, those with an `af.field` converter too, so it runs in a
`__check_init__`, added only to classes that ask for it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ._errors import class_name, did_you_mean
from ._field import (
    CONVERTERS,
    NOT_YET,
    VALIDATES,
    FieldConverter,
    batch_converters,
)
from ._internals import (
    ARRAY_IMPL,
    EQX_MODULE,
    after_module_class,
    class_being_built,
)
from ._validate import enabled_by_environment, validate


def _widen_init_annotations(cls: type, converters: dict[str, FieldConverter]) -> None:
    """Let jaxtyping/beartype-checked `__init__`s accept scalars for array fields.

    What equinox does for a converter's first-parameter annotation, done for the
    fields converted in one pass. Fields with a converter of their own keep the
    annotation equinox gave them.
    """
    annotations = cls.__init__.__annotations__
    for name, converter in converters.items():
        if name not in annotations or converter.spec is NOT_YET:
            continue
        if cls.__dataclass_fields__[name].metadata.get("converter") is None:
            annotations[name] = converter.__signature__.parameters["value"].annotation


def _make_init(cls: type, init: Callable[..., None], converters: dict):
    """`cls.__init__`: the class's own `__init__`, then every field of
    `converters` stored converted, in one pass.

    Only an instance of `cls` itself converts here: a subclass's `__init__` that
    calls `super().__init__()` converts once, when it returns itself (each class
    with fields to convert gets its own wrapper, inherited `__init__` or not).
    The conversion is written out here, not called: this runs for every instance.
    """
    fields = tuple(converters.items())
    array_impl = ARRAY_IMPL  # a closure cell: cheaper than a global

    @functools.wraps(init)  # the signature, `__annotations__` and docs stay init's
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if type(self) is not cls and class_being_built(type(self)) is not cls:
            return
        values = self.__dict__
        for name, converter in fields:
            try:
                value: Any = values[name]
            except KeyError:
                # A custom __init__ left it to the class default, or did not set it
                # (equinox names the missing field right after).
                value = getattr(self, name, _UNSET)
                if value is _UNSET:
                    continue
            if type(value) is array_impl:
                # Inlined: the common case of an array that is already right.
                # `.aval.dtype` is about half the cost of `.dtype`.
                fast = converter.fast_dtypes
                if fast is None or value.aval.dtype in fast:
                    continue
            new = converter.store(value, cls)
            if new is not value:
                object.__setattr__(self, name, new)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


_UNSET = object()


def _make_check_init(cls: type, own_check: Callable[[Any], None] | None):
    """`cls.__check_init__` for `check=True`: validate, then the class's own check.

    Equinox calls the `__check_init__` of every class in the MRO, most derived first,
    after `__init__` and after field converters: every field is converted by then.
    It replaces the class's own `__check_init__` (calling it), so only a class that
    has none gains a hook.
    """

    def __check_init__(self):
        if class_being_built(type(self)) is cls:
            validate(self)
        if own_check is not None:
            own_check(self)

    __check_init__.__qualname__ = f"{cls.__qualname__}.__check_init__"
    return __check_init__


def _init_behind_array_module(cls: type, base: type) -> Callable | None:
    """The custom `__init__` that `class C(af.ArrayModule, eqx.nn.Linear)` would lose.

    Equinox gives a class without an `__init__` of its own a dataclass `__init__`
    if the first Module in its MRO has one, and with `ArrayModule` listed first
    that is `ArrayModule`, whose (empty) dataclass `__init__` would also come
    before the layer's in the MRO. `ArrayModule` adds no fields, so decide as if it
    were not there: return the `__init__` the class should have, or None if the
    dataclass one is right. Asked from `__init_subclass__`, which runs before
    equinox looks for an `__init__` in the class.
    """
    if len(cls.__bases__) < 2 or "__init__" in cls.__dict__:
        return None  # the one base decides, as for any Module; or its own
    mro = cls.__mro__[1:]
    # The classes equinox asks, in order (object last, never asked).
    asked = [
        klass
        for klass in mro[:-1]
        if issubclass(klass, EQX_MODULE) or klass.__init__ is not object.__init__
    ]
    if len(asked) < 2 or asked[0] is not base:
        return None
    behind = asked[1]
    if issubclass(behind, EQX_MODULE) and behind.__dataclass_params__.init:  # pyright: ignore[reportAttributeAccessIssue]
        return None
    for klass in mro:
        if klass is not base and "__init__" in klass.__dict__:
            return klass.__dict__["__init__"]
    return None


def _finish_class(cls: type) -> None:
    """Finish an ArrayModule class once equinox has made it a dataclass.

    It gets its converters (annotations parsed once, here), an `__init__` that
    converts after it runs (its annotations, which runtime type checkers read,
    widened), and for `check=True` the `__check_init__` that validates. Equinox's
    own metaclass runs this step (`after_module_class`), so ArrayModule needs no
    metaclass of its own, and a library's metaclass derived from equinox's works
    with it unchanged.
    """
    if not _derives_from_array_module(cls):
        return  # a plain Module, or ArrayModule itself
    converters = batch_converters(cls)
    setattr(cls, CONVERTERS, converters)
    if cls.__dataclass_params__.init:  # pyright: ignore[reportAttributeAccessIssue]
        # Equinox made this class a dataclass `__init__` of its own.
        _widen_init_annotations(cls, converters)
    # A class with nothing to convert needs no wrapper: its parents' wrappers skip
    # instances of subclasses (`type(self) is cls`), so nothing is lost.
    if converters:
        type.__setattr__(cls, "__init__", _make_init(cls, cls.__init__, converters))
    if getattr(cls, VALIDATES, False):
        own_check = cls.__dict__.get("__check_init__")
        type.__setattr__(cls, "__check_init__", _make_check_init(cls, own_check))


# Marks the ArrayModule class itself. Recognising it by this mark rather than by
# identity keeps classes converted after `importlib.reload` of this module (what
# IPython's autoreload does when the file changes): the reload makes a second
# ArrayModule class, and subclasses of either must be finished.
_BASE_MARK = "__arrayfield_base__"


def _derives_from_array_module(cls: type) -> bool:
    return any(klass.__dict__.get(_BASE_MARK) for klass in cls.__mro__[1:])


class ArrayModule(EQX_MODULE):
    """`eqx.Module`, with array-annotated fields stored as strongly typed arrays.

    Subclass it instead of `eqx.Module`. When any `__init__` (the dataclass one or
    your own) returns, and so before any `__check_init__` you wrote, each field
    whose annotation denotes an
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
      loop buffers, quax-style values) are stored unchanged; with `check=True`,
      only those that stand in for arrays (`.shape` and `.dtype`) pass.
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

    __arrayfield_base__ = True  # _BASE_MARK, read from this class's own __dict__

    def __init_subclass__(cls, *, check: bool | None = None, **kwargs: Any):
        # `__class__`: the ArrayModule this method belongs to, also after a reload
        # has bound the module's global name to a newer one.
        base = __class__
        if kwargs:
            _reject_unknown_class_keywords(cls, base, kwargs)
        super().__init_subclass__(**kwargs)
        shadowed = _init_behind_array_module(cls, base)
        if shadowed is not None:
            type.__setattr__(cls, "__init__", shadowed)  # before equinox looks
        if check if check is not None else enabled_by_environment():
            setattr(cls, VALIDATES, True)  # inherited: subclasses validate too
        elif check is False:
            setattr(cls, VALIDATES, False)


after_module_class(_finish_class)


def _reject_unknown_class_keywords(
    cls: type, base: type, kwargs: dict[str, Any]
) -> None:
    """Name a misspelled `class C(af.ArrayModule, chek=True)` keyword.

    Left alone when a base after `ArrayModule` in the MRO takes class keywords of
    its own (an `__init_subclass__` other than `object`'s).
    """
    mro = cls.__mro__
    for klass in mro[mro.index(base) + 1 :]:
        if "__init_subclass__" in klass.__dict__:
            if klass is not object:
                return
            break
    name = min(kwargs)
    raise TypeError(
        f"{class_name(cls)}: unknown class keyword {name}={kwargs[name]!r}."
        f"{did_you_mean(name, ['check', 'strict', 'is_abstract'])} "
        "An ArrayModule subclass takes check=True/False (validation against the "
        "annotations) and equinox's strict= and is_abstract=."
    )
