"""`af.export` and `af.deserialize`: a step over ArrayModules, saved as a program.

`jax.export` saves a `jax.jit` function of arrays. A step over Modules is more:
its arguments are trees whose static fields, Python numbers and structure were
baked into the program when it was traced, and its outputs may hold objects
that are not arrays. Here the step is traced as `eqx.filter_jit` traces it
(arrays, or `jax.ShapeDtypeStruct` specs of them, are inputs; every other leaf
is a constant of the program), exported with JAX's own serialization, and the
rest is kept beside it: the arguments and outputs with each array replaced by
its shape and dtype. A loaded step rebuilds both in the loading process, checks
each call's static part against the exported one (as `_aot.Compiled` does) and
returns the outputs as the live call would.

The static part is written with `pickle`: the classes it holds (the Modules,
optax's states) are imported by name when it is loaded, and loading runs
whatever the data says, as any pickle. Load only what you trust.
"""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from typing import Any

import equinox as eqx
import jax
import jax.export  # a submodule `import jax` loads only on newer JAX
import jax.extend
import jax.tree_util as jtu
import numpy as np

from . import (
    _aot,
    _blocks,
    _eqx_private,
    _jax_private,
    _kept_families,
    _layouts,
    _numbers,
)
from ._errors import short_repr, versions

# A difference no field shows: the arguments passed by keyword where they were
# by position (or the reverse), or a node's hidden data. Equinox 0.12 keeps a
# class's `__annotations__` in the tree structure of the Modules JAX rebuilds
# (`tree_map`, optax's states): a loaded copy of it never compares equal.
_UNSEEN = (
    "the arguments are passed by position and keyword otherwise, or their "
    "trees differ in data no field shows (on equinox 0.12, Modules rebuilt by "
    "jax.tree_util keep their class's annotations there, which a loaded step "
    "cannot match: load it with equinox 0.13 or later)"
)

# What a serialized step starts with, and the version of what follows.
_MAGIC = b"arrayfield.export\x00"
_FORMAT = 1
# A serialized family (`export_family`) starts so.
_FAMILY_MAGIC = b"arrayfield.family\x00"


@dataclasses.dataclass(frozen=True)
class _Array:
    """An array's place in a saved tree: its shape and dtype (a leaf, compared
    by value: a call's arrays are saved so too before they are compared)."""

    shape: tuple[int, ...]
    dtype: str  # its name: PRNG key types (`key<fry>`) have no NumPy dtype


def _is_input(x: Any) -> bool:
    return eqx.is_array(x) or isinstance(x, jax.ShapeDtypeStruct)


def _saved(tree: Any) -> Any:
    return jtu.tree_map(
        lambda x: _Array(tuple(x.shape), str(x.dtype)) if _is_input(x) else x,
        tree,
        is_leaf=lambda x: isinstance(x, jax.ShapeDtypeStruct),
    )


def _call_parts(args: tuple, kwargs: dict) -> tuple[Any, list]:
    """`(static part, arrays)` of a call, in one flatten: the static part as
    `_aot.static_part(_saved(...))` gives it, the arrays in flattening order
    (the exported program's inputs)."""
    leaves, treedef = jtu.tree_flatten((args, kwargs))
    arrays = [x for x in leaves if eqx.is_array(x)]
    saved = (
        _Array(tuple(x.shape), str(x.dtype)) if _is_input(x) else x for x in leaves
    )
    return (treedef, tuple((type(x), x) for x in saved)), arrays


def _traced_function(fun: Any) -> Any:
    # A filter_jit wrapper (equinox's or ours) is traced as the function it
    # wraps: its semantics are the ones used here.
    return fun.__wrapped__ if _eqx_private.is_filter_jit(fun) else fun


class Exported:
    """A step traced for one call's static part; `af.export` makes one and
    `af.deserialize` loads one. Calling it runs the exported program on the
    call's arrays, after checking that everything else is what it was exported
    for; `.serialize()` gives the bytes to write; `.program` is JAX's
    `jax.export.Exported` (its input and output avals, its platforms).

    !!! example

        ```python
        import jax.numpy as jnp
        import arrayfield as af

        def scale(x, factor):
            return x * factor

        exported = af.export(scale, jnp.ones(3), 2)  # factor=2 is in the program
        assert exported(jnp.arange(3.0), 2).tolist() == [0.0, 2.0, 4.0]
        assert exported.program.in_avals[0].shape == (3,)
        ```
    """

    def __init__(self, program: Any, arguments: Any, outputs: Any, names: tuple):
        self.program = program  # the `jax.export.Exported`
        self._names = names  # the function's name, its positional parameters'
        self._arguments = arguments  # (args, kwargs), arrays as `_Array`s
        self._outputs = outputs  # the output, arrays as `_Array`s
        self._expected = self._by_name(*arguments)
        # As passed, positions and keywords apart (the program's inputs are the
        # call's arrays in the order `export` flattened them), each array's
        # shape and dtype included.
        self._static = _aot.static_part(arguments)
        self._out_leaves, self._out_tree = jtu.tree_flatten(outputs)
        self._run = jax.jit(program.call)

    def __repr__(self) -> str:
        return f"af.Exported({self._names[0]})"

    def _by_name(self, args: tuple, kwargs: dict) -> dict:
        # Named by the function's parameters where it was exported with them
        # (its signature does not travel: a call must pass them as exported).
        names = self._names[1]
        named = {
            names[i] if i < len(names) else f"args[{i}]": x for i, x in enumerate(args)
        }
        return {**named, **kwargs}

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        static, arrays = _call_parts(args, kwargs)
        if not _aot.same(static, self._static):
            saved = _saved((args, kwargs))
            what = _aot.first_difference(self._expected, self._by_name(*saved), "")
            what = what or _UNSEEN
            raise TypeError(
                f"{self!r} was exported for other arguments: {what}. "
                f"{_aot.BAKED_IN} Export the step again for these arguments "
                "(passed as they were: the same positions and keywords)."
            )
        results = iter(self._run(*arrays))
        leaves = [next(results) if type(x) is _Array else x for x in self._out_leaves]
        return jtu.tree_unflatten(self._out_tree, leaves)

    def serialize(self) -> bytes:
        """The step as bytes, for `af.deserialize` in another process. Needs
        `flatbuffers` (`pip install 'arrayfield[export]'`), as JAX's own
        serialization does."""
        _need_flatbuffers("serialize")
        try:
            static = pickle.dumps(
                (_FORMAT, self._names, self._arguments, self._outputs), protocol=5
            )
        except Exception as error:
            raise TypeError(
                f"{self!r}.serialize(): the arguments' and outputs' non-array "
                f"parts must pickle, and one does not ({type(error).__name__}: "
                f"{error}). Classes defined at a module's top level pickle "
                "by name; lambdas and local classes do not."
            ) from error
        program = bytes(self.program.serialize())
        return _MAGIC + len(static).to_bytes(8, "little") + static + program


def _need_flatbuffers(what: str) -> None:
    try:
        import flatbuffers  # noqa: F401
    except ImportError:
        raise ImportError(
            f"af.{what} needs the flatbuffers package, which JAX's export "
            "serialization uses but does not install: pip install "
            "'arrayfield[export]'"
        ) from None


def export(fun: Any, /, *args: Any, **kwargs: Any) -> Exported:
    """Trace and export `fun` for these arguments, as a program another process
    loads with `af.deserialize` and runs without tracing it again.

    The arguments are those of one call, as `af.filter_jit(fun)` takes them:
    JAX and NumPy arrays, or `jax.ShapeDtypeStruct` specs of them (what
    `eqx.filter_eval_shape` returns), are the program's inputs; every other
    leaf (static fields, Python numbers, strings) and the trees' structure are
    part of the program, and every later call must have the same, passed the
    same way (positions and keywords), and arrays of the same shapes and
    dtypes; a call that differs raises a `TypeError` naming the first argument
    or field that does. `fun` may be an `af.filter_jit` or `eqx.filter_jit`
    wrapper, or the function itself; its own arrays become constants of the
    program.

    The result runs the program when called (checked, as a loaded one) and
    gives its bytes with `.serialize()`. What is exported is JAX's
    `jax.export` program (`.program`), so JAX's rules for it hold: it loads on
    later JAX versions within JAX's compatibility window, runs on the platform
    it was exported for (the default backend's), and cannot hold host
    callbacks (`eqx.error_if`, `jax.debug.print`).

    !!! example

        ```python
        import jax.numpy as jnp
        from jaxtyping import Array, Float
        import arrayfield as af

        class Scene(af.ArrayModule):
            flux: Float[Array, ""]
            origin: int = af.field(static=True)

        def render(scene, image):
            return image[scene.origin :] * scene.flux, "rendered"

        exported = af.export(render, Scene(flux=2.0, origin=1), jnp.ones(3))
        image, note = exported(Scene(flux=3.0, origin=1), jnp.ones(3))
        assert image.tolist() == [3.0, 3.0] and note == "rendered"
        try:
            exported(Scene(flux=3.0, origin=2), jnp.ones(3))  # another origin
        except TypeError as error:
            assert "origin is 2 where it was 1" in str(error)
        ```
    """
    function = _traced_function(fun)
    program, specs, outputs = _as_program(function, args, kwargs)
    exported = jax.export.export(jax.jit(program))(*specs)
    names = (program.__name__, _positional_names(function, len(args)))
    return Exported(exported, _saved((args, kwargs)), _saved(outputs[-1]), names)


def _as_program(function: Any, args: tuple, kwargs: dict) -> tuple[Any, list, list]:
    """`(program, specs, outputs)`: the call as `eqx.filter_jit` traces it, a
    function of the call's arrays (or specs) alone, in flattening order, that
    returns the output's arrays; their specs; and a list that each trace of the
    program appends the function's whole output to."""
    leaves, treedef = jtu.tree_flatten((args, kwargs))
    inputs = [i for i, x in enumerate(leaves) if _is_input(x)]
    specs = [
        jax.ShapeDtypeStruct(
            np.shape(leaves[i]),
            leaves[i].dtype,
            weak_type=bool(getattr(leaves[i], "weak_type", False)),
        )
        for i in inputs
    ]
    outputs: list[Any] = []

    def program(*arrays: Any) -> list[Any]:
        full = list(leaves)
        for i, x in zip(inputs, arrays, strict=True):
            full[i] = x
        call_args, call_kwargs = jtu.tree_unflatten(treedef, full)
        out = function(*call_args, **call_kwargs)
        outputs.append(out)
        return [x for x in jtu.tree_leaves(out) if eqx.is_array(x)]

    name = getattr(function, "__name__", type(function).__name__)
    program.__name__ = program.__qualname__ = name
    return program, specs, outputs


def _positional_names(function: Any, count: int) -> tuple[str, ...]:
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # no signature: args[i]
        return ()
    names = []
    for p in parameters[:count]:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    return tuple(names)


@dataclasses.dataclass(frozen=True)
class _Form:
    """What the fields of one family share: a digest of their program with its
    numbers blanked (`_kept_families.name`: the program as printed, the jit's
    options, which blocks lie within their arrays, JAX's version, the
    platform), how many numbers it embeds, which of them the exported program
    takes as inputs and how they are packed, and the values (as bits) of the
    others, which it keeps as literals."""

    digest: str
    count: int
    lifted: frozenset[int]
    fixed: tuple[tuple[int, bytes], ...]
    where: tuple[tuple[int, int, bool], ...]


@dataclasses.dataclass
class _Field:
    """One call traced as `export` traces it, and its program's numbers."""

    closed: Any
    at: tuple
    found: tuple
    digest: str
    specs: list
    outputs: Any


def _field(function: Any, args: tuple, kwargs: dict) -> _Field:
    program, specs, outputs = _as_program(function, args, kwargs)
    traced = jax.jit(program).trace(*specs)
    closed, params = _jax_private.traced_program(traced)
    at = _numbers.sites(closed.jaxpr)
    bounds = tuple(inside for _, inside in _blocks.windows(closed.jaxpr))
    options = sorted((k, v) for k, v in params.items() if k != "jaxpr")
    digest = _kept_families.name(_numbers.blanked(closed, at), (options, bounds))
    found = _numbers.numbers(closed.jaxpr, at)
    return _Field(closed, at, found, digest, specs, _saved(outputs[-1]))


def _value(number: Any) -> str:
    # As its own dtype prints it: 0.3, not float32's nearest double.
    return str(np.asarray(number.value, number.dtype)[()])


def _lifted_numbers(field: _Field, lifted: frozenset[int], where: str) -> tuple:
    """`(numbers, constants)` the family's program takes for this field; an
    error where one of them would compute otherwise than as a literal."""
    at, _ = _numbers.selected(field.closed.jaxpr, field.at, lifted)
    found = _numbers.numbers(field.closed.jaxpr, at)
    constants = tuple(field.closed.consts)
    if _numbers.folded_otherwise(found, constants):
        values = ", ".join(map(_value, found))
        raise TypeError(
            f"{where}: a number the family's program takes as an input ({values}) "
            "or an array it captures is a float zero, subnormal, infinite or NaN, "
            "which XLA folds otherwise as a literal than it computes as an input: "
            "the program would not give this field's own results. Export this "
            "field on its own (af.export)."
        )
    return tuple(_numbers.packed(found)), constants


class ExportedFamily:
    """One exported program for the fields of a family: calls whose programs
    differ only in the numbers they embed (static origins and sizes, Python
    floats; see `af.filter_jit`'s `share_numbers`). `af.export_family` makes
    one and `af.deserialize(data, fun)` loads one. Each call with a static
    part new to it traces `fun` (once: the result is kept per static part),
    checks that its program is of the family and that the numbers the exported
    program keeps as literals are the ones it was exported with, and runs the
    exported program with the call's arrays and numbers; its non-array outputs
    are the ones its own trace returned. `.serialize()` gives its bytes;
    `.program` is JAX's `jax.export.Exported`.

    !!! example

        ```python
        import jax.numpy as jnp
        import arrayfield as af

        def shifted(x, by):
            return x + by

        family = af.export_family(shifted, (jnp.zeros(2), 1.0), (jnp.zeros(2), 2.0))
        loaded = af.deserialize(family.serialize(), shifted)
        assert loaded(jnp.ones(2), 5.0).tolist() == [6.0, 6.0]
        assert len(loaded.program.in_avals) == 2  # x, and the numbers lifted
        ```
    """

    def __init__(self, program: Any, form: _Form, name: str, function: Any):
        self.program = program
        self._form = form
        self._name = name
        self._function = function
        self._run = jax.jit(program.call)
        self._fields: dict[Any, tuple] = {}

    def __repr__(self) -> str:
        return f"af.ExportedFamily({self._name})"

    def _numbers_of(self, args: tuple, kwargs: dict) -> tuple:
        field = _field(self._function, args, kwargs)
        form = self._form
        if field.digest != form.digest or len(field.found) != form.count:
            raise TypeError(
                f"{self!r}: these arguments give a program of another family: it "
                "differs from the exported one in more than the numbers it embeds "
                "(an array's shape, an operation, a slice's size). Export a family "
                "of fields like these."
            )
        bits = _numbers.bits(field.found)
        for k, old in form.fixed:
            if bits[k] != old:
                new = field.found[k]
                was = np.frombuffer(old, new.dtype)[0]
                raise TypeError(
                    f"{self!r}: a number the program embeds is {_value(new)} here "
                    f"where it was {was} in every field it was "
                    "exported from, so the exported program holds it as a "
                    "literal. Export the family with fields that vary it too."
                )
        vectors, constants = _lifted_numbers(field, form.lifted, repr(self))
        return vectors, constants, field.outputs

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        key, arrays = _call_parts(args, kwargs)
        try:
            found = self._fields.get(key)
        except TypeError:  # an unhashable static leaf: traced at every call
            found, key = None, None
        if found is None:
            found = self._numbers_of(args, kwargs)
            if key is not None:
                self._fields[key] = found
        vectors, constants, outputs = found
        results = iter(self._run(arrays, vectors, constants))
        leaves, treedef = jtu.tree_flatten(outputs)
        leaves = [next(results) if type(x) is _Array else x for x in leaves]
        return jtu.tree_unflatten(treedef, leaves)

    def serialize(self) -> bytes:
        """The family's program as bytes, for `af.deserialize(data, fun)` in
        another process (which needs `fun`, to trace each new field)."""
        _need_flatbuffers("serialize")
        static = pickle.dumps((_FORMAT, self._name, self._form), protocol=5)
        program = bytes(self.program.serialize())
        return _FAMILY_MAGIC + len(static).to_bytes(8, "little") + static + program


def export_family(fun: Any, /, *calls: tuple) -> ExportedFamily:
    """Export one program for every field of a family: calls of `fun` whose
    programs differ only in the numbers they embed, such as a source's static
    origin used to slice, or a Python float, the fields that
    `af.filter_jit(fun, share_numbers=True)` runs on one shared program.

    Each of `calls` is one call's positional arguments, as `af.export` takes
    them (arrays or `jax.ShapeDtypeStruct` specs are inputs). Their programs
    must be of one family (the same operations and shapes); the numbers that
    differ among them become inputs of the exported program, and every other
    number stays a literal, as with `share_numbers`. Give fields that vary
    every number later fields will vary: a loaded family refuses a field
    that differs in a number it holds as a literal, or whose program is of
    another family, and never runs it otherwise.

    The loading process passes the step itself, `af.deserialize(data, fun)`:
    a field's numbers come from tracing it (once per static part). Results
    are within `share_numbers`' bound of the field's own program (see
    docs/many_fields.md), not bitwise; a field whose numbers XLA would fold
    otherwise as literals (float zeros, subnormals, infinities, NaN) is
    refused, to be exported on its own.

    !!! example

        ```python
        import jax.numpy as jnp
        import arrayfield as af

        def window(image, origin):
            return image[origin : origin + 2].sum()

        image = jnp.arange(8.0)
        family = af.export_family(window, (image, 1), (image, 4))
        assert float(family(image, 6)) == 13.0  # a new origin: no new export
        ```
    """
    function = _traced_function(fun)
    name = getattr(function, "__name__", type(function).__name__)
    where = f"af.export_family({name})"
    unshared = _layouts.numbers_unshared()  # the probe share_numbers runs
    if unshared is not None:
        raise NotImplementedError(
            f"{where}: programs that differ only in numbers cannot share one on "
            f"{versions()}: {unshared}. Export each field on its own (af.export)."
        )
    if not calls or not all(type(call) is tuple for call in calls):
        raise TypeError(
            f"{where}: give each call's positional arguments as a tuple, at least "
            "one: af.export_family(step, (field_1, data), (field_2, data))"
        )
    fields = [_field(function, call, {}) for call in calls]
    first = fields[0]
    for i, field in enumerate(fields[1:], 2):
        if field.digest != first.digest or len(field.found) != len(first.found):
            raise ValueError(
                f"{where}: call {i}'s program differs from call 1's in more than "
                "the numbers it embeds (an array's shape, an operation, a slice's "
                "size): a family's fields differ only in numbers"
            )
    bits = [_numbers.bits(field.found) for field in fields]
    differ = frozenset(
        k for k in range(len(first.found)) if len({b[k] for b in bits}) > 1
    )
    at, lifted = _numbers.selected(first.closed.jaxpr, first.at, differ)
    for i, field in enumerate(fields, 1):
        _lifted_numbers(field, lifted, f"{where}, call {i}")
    found = _numbers.numbers(first.closed.jaxpr, at)
    form = _Form(
        first.digest,
        len(first.found),
        lifted,
        tuple((k, bits[0][k]) for k in range(len(first.found)) if k not in lifted),
        _numbers.unpacking(found),
    )
    general = jax.extend.core.jaxpr_as_fun(_numbers.generalised(first.closed, at))

    def program(arrays: list, vectors: tuple, constants: tuple) -> list:
        numbers = _numbers.unpacked(vectors, form.where)
        return general(*constants, *arrays, *numbers)

    program.__name__ = program.__qualname__ = name
    vectors, constants = _lifted_numbers(first, lifted, where)
    specs = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(
            np.shape(x), x.dtype, weak_type=bool(getattr(x, "weak_type", False))
        ),
        (vectors, constants),
    )
    exported = jax.export.export(jax.jit(program))(first.specs, *specs)
    return ExportedFamily(exported, form, name, function)


def deserialize(data: bytes, fun: Any = None) -> Exported | ExportedFamily:
    """Load a step written by `af.export(...).serialize()`, or a family written
    by `af.export_family(...).serialize()` (then pass the step as `fun`: each
    new field is traced to find its numbers).

    The classes its arguments and outputs hold are imported by name (import
    what defines them, as for pickle); loading runs what the data says, so
    load only steps you trust. The loaded step checks each call's static part
    as the exported one does, and returns bitwise what the live call returns,
    on the platform and JAX version it was exported on.

    !!! example

        ```python
        import jax.numpy as jnp
        import arrayfield as af

        def step(params, rate):
            return {k: v * (1 - rate) for k, v in params.items()}, "stepped"

        params = {"flux": jnp.ones(2)}
        data = af.export(step, params, 0.5).serialize()  # bytes to write
        loaded = af.deserialize(data)  # in the same or another process
        new, note = loaded(params, 0.5)
        assert new["flux"].tolist() == [0.5, 0.5] and note == "stepped"
        ```
    """
    _need_flatbuffers("deserialize")
    data = bytes(data)
    if data.startswith(_FAMILY_MAGIC):
        return _family(data, fun)
    if not data.startswith(_MAGIC):
        raise ValueError(
            "af.deserialize: these bytes are not a step written by "
            f"af.export(...).serialize() (they start {short_repr(data[:24], 40)})"
        )
    start = len(_MAGIC) + 8
    size = int.from_bytes(data[len(_MAGIC) : start], "little")
    try:
        version, names, arguments, outputs = pickle.loads(data[start : start + size])
    except Exception as error:
        raise TypeError(
            "af.deserialize: the step's arguments or outputs hold something this "
            f"process cannot rebuild ({type(error).__name__}: {error}); import "
            "the modules that define their classes, at the versions it was "
            "exported with"
        ) from error
    if version != _FORMAT:
        raise ValueError(
            f"af.deserialize: {names[0]} was written in format {version}; this "
            f"arrayfield reads format {_FORMAT}"
        )
    program = jax.export.deserialize(bytearray(data[start + size :]))
    return Exported(program, arguments, outputs, names)


def _family(data: bytes, fun: Any) -> ExportedFamily:
    start = len(_FAMILY_MAGIC) + 8
    size = int.from_bytes(data[len(_FAMILY_MAGIC) : start], "little")
    version, name, form = pickle.loads(data[start : start + size])
    if version != _FORMAT:
        raise ValueError(
            f"af.deserialize: the family of {name} was written in format "
            f"{version}; this arrayfield reads format {_FORMAT}"
        )
    if fun is None:
        raise TypeError(
            f"af.deserialize: these bytes are a family of {name} (af.export_family), "
            "whose fields' numbers come from tracing the step: pass it, "
            f"af.deserialize(data, {name})"
        )
    program = jax.export.deserialize(bytearray(data[start + size :]))
    return ExportedFamily(program, form, name, _traced_function(fun))
