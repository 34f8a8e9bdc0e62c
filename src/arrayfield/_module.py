"""`ArrayModule`: equinox's Module whose array fields store arrays.

Everything happens through what Python and equinox document: while `type.__new__`
builds a subclass, `ArrayModule.__init_subclass__` declares each array field with
an arrayfield converter (`_declare.declare_array_fields`), and equinox, which makes
the class a dataclass right after, runs those converters as it runs any
`eqx.field(converter=...)`: once the class's `__init__` (the dataclass one or a
custom one) has returned, before any `__check_init__`. Nothing is added to the
MRO, so code that walks the hooks equinox will call (quax's fast construction
path counts the `__check_init__`s) sees a subclass exactly as it sees an
`eqx.Module` one, and nothing of equinox's is replaced. Validation (`check=True`)
needs every field converted, so it runs in a `__check_init__`, added only to
classes that ask for it, and before equinox records the class's hooks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox
import jax
import numpy as np
from jaxtyping import Float

from ._declare import VALIDATES, declare_array_fields
from ._errors import ValidationError, class_name, did_you_mean
from ._facts import EQX_MODULE
from ._validate import enabled_by_environment, validate


def _make_check_init(cls: type, own_check: Callable[[Any], None] | None):
    """`cls.__check_init__` for `check=True`: validate, then the class's own check.

    Equinox calls the `__check_init__` of every class in the MRO, most derived first,
    after `__init__` and after field converters: every field is converted by then.
    It replaces the class's own `__check_init__` (calling it), so only a class that
    has none gains a hook; only the hook of the instance's own class validates.
    """

    def __check_init__(self):
        if type(self) is cls:
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
        declare_array_fields(cls)
        if check if check is not None else enabled_by_environment():
            setattr(cls, VALIDATES, True)  # inherited: subclasses validate too
        elif check is False:
            setattr(cls, VALIDATES, False)
        if getattr(cls, VALIDATES, False):
            own_check = cls.__dict__.get("__check_init__")
            type.__setattr__(cls, "__check_init__", _make_check_init(cls, own_check))


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


def _check_equinox_runs_our_hooks() -> None:
    """Fail at import, naming the versions, if equinox stops doing what
    ArrayModule is built on: running a field's converter after `__init__`, and a
    `__check_init__` set while the class is created. Checked by behaviour, on
    NumPy arrays (no JAX backend starts)."""

    class Probe(ArrayModule, check=True):
        x: Float[np.ndarray, "2"]  # noqa: UP037 - a jaxtyping shape, not a name

    try:
        stored = Probe(x=[0.5, 1.5]).x  # pyright: ignore[reportArgumentType]
    except ValidationError:  # validated before (or without) converting
        stored = None
    broken = ""
    if not isinstance(stored, np.ndarray):
        broken = "a list given to an array field was not stored converted"
    else:
        try:
            Probe(x=[0.5, 1.5, 2.5])  # pyright: ignore[reportArgumentType]
            broken = "a check=True class accepted a wrongly shaped array"
        except ValidationError:
            pass
    if broken:
        raise ImportError(
            f"arrayfield cannot work with equinox {equinox.__version__} and jax "
            f"{jax.__version__}: {broken}. equinox no longer runs the field "
            "converters or __check_init__ hooks arrayfield declares while a class "
            "is created. Install a supported equinox (see arrayfield's "
            "pyproject.toml) and report this."
        )


_check_equinox_runs_our_hooks()
