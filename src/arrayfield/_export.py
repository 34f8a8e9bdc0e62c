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
import jax.tree_util as jtu
import numpy as np

from . import _aot, _eqx_private
from ._errors import short_repr

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
        saved = _saved((args, kwargs))
        if not _aot.same(_aot.static_part(saved), self._static):
            what = _aot.first_difference(self._expected, self._by_name(*saved), "")
            what = what or _UNSEEN
            raise TypeError(
                f"{self!r} was exported for other arguments: {what}. "
                f"{_aot.BAKED_IN} Export the step again for these arguments "
                "(passed as they were: the same positions and keywords)."
            )
        # In the order the program takes them: as `export` flattened the call.
        arrays = [x for x in jtu.tree_leaves((args, kwargs)) if eqx.is_array(x)]
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
    exported = jax.export.export(jax.jit(program))(*specs)
    names = (name, _positional_names(function, len(args)))
    return Exported(exported, _saved((args, kwargs)), _saved(outputs[-1]), names)


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


def deserialize(data: bytes) -> Exported:
    """Load a step written by `af.export(...).serialize()`.

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
