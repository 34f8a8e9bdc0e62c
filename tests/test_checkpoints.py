"""Checkpoints across a migration: `eqx.tree_serialise_leaves` between plain
`eqx.Module` classes holding Python scalars and their `af.ArrayModule` versions.

What each direction really does (equinox's own deserialisation, pinned here and
documented in docs/checkpoints.md):

- Python scalars are saved as 64-bit NumPy values; loading into an array leaf uses
  `jnp.load`, i.e. the *saved* dtype canonicalised by JAX, and equinox then
  requires it to equal the dtype of the `like` leaf.
- Loading into a Python-scalar leaf gives `type(like_leaf)(saved.item())`.
"""

import io

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Bool, Float, Int

import arrayfield as af


class PlainLayer(eqx.Module):
    weight: Float[Array, ""]
    steps: Int[Array, ""]
    active: Bool[Array, ""]


class PlainModel(eqx.Module):
    layer: PlainLayer
    rate: Float[Array, ""]
    name: str = "model"


class Layer(af.ArrayModule):
    weight: Float[Array, ""]
    steps: Int[Array, ""]
    active: Bool[Array, ""]


class Model(af.ArrayModule):
    layer: Layer
    rate: Float[Array, ""]
    name: str = "model"


def save(tree) -> io.BytesIO:
    file = io.BytesIO()
    eqx.tree_serialise_leaves(file, tree)
    file.seek(0)
    return file


def summary(tree) -> list[tuple[str, object]]:
    """(type or dtype, value) of each leaf."""
    return [
        (str(leaf.dtype), leaf.item())
        if isinstance(leaf, jax.Array)
        else (type(leaf).__name__, leaf)
        for leaf in jax.tree_util.tree_leaves(tree)
    ]


def test_plain_scalars_load_into_array_module_as_strong_arrays():
    plain = PlainModel(PlainLayer(weight=1.5, steps=3, active=True), rate=0.5)
    like = Model(Layer(weight=0.0, steps=0, active=False), rate=0.0)
    loaded = eqx.tree_deserialise_leaves(save(plain), like)
    assert summary(loaded) == [
        ("float32", 1.5),
        ("int32", 3),
        ("bool", True),
        ("float32", 0.5),
        ("str", "model"),
    ]
    assert not any(leaf.weak_type for leaf in jax.tree_util.tree_leaves(loaded)[:4])
    # already what the annotations ask for: af.normalize has nothing to do
    assert af.normalize(loaded) is loaded


def test_plain_float_loads_rounded_to_float32_without_x64():
    plain = PlainModel(PlainLayer(weight=0.1, steps=0, active=False), rate=0.0)
    like = Model(Layer(weight=0.0, steps=0, active=False), rate=0.0)
    loaded = eqx.tree_deserialise_leaves(save(plain), like)
    assert loaded.layer.weight.dtype == jnp.float32
    assert loaded.layer.weight.item() == float(np.float32(0.1))


def test_plain_int_in_a_float_field_does_not_load_directly():
    # The bug arrayfield fixes, frozen in a checkpoint: an int in a Float field is
    # saved as int64, loads as int32, and equinox refuses the float32 `like` leaf.
    plain = PlainModel(PlainLayer(weight=1, steps=3, active=True), rate=2)
    like = Model(Layer(weight=0.0, steps=0, active=False), rate=0.0)
    with pytest.raises(RuntimeError, match="changed dtype from float32"):
        eqx.tree_deserialise_leaves(save(plain), like)


def test_plain_int_in_a_float_field_loads_via_the_plain_classes_and_normalize():
    plain = PlainModel(PlainLayer(weight=1, steps=3, active=True), rate=2)
    raw = eqx.tree_deserialise_leaves(save(plain), plain)  # Python scalars again
    assert summary(raw) == summary(plain)
    like = Model(Layer(weight=0.0, steps=0, active=False), rate=0.0)
    moved = jax.tree_util.tree_unflatten(
        jax.tree_util.tree_structure(like), jax.tree_util.tree_leaves(raw)
    )
    # built without __init__: the Python scalars are still there...
    assert moved.layer.weight == 1 and type(moved.layer.weight) is int
    model = af.normalize(moved)  # ...until normalize converts them
    assert summary(model) == [
        ("float32", 1.0),
        ("int32", 3),
        ("bool", True),
        ("float32", 2.0),
        ("str", "model"),
    ]


def test_array_module_loads_into_plain_scalars_of_the_like_types():
    model = Model(Layer(weight=2.5, steps=7, active=True), rate=0.1)
    like = PlainModel(PlainLayer(weight=0.0, steps=0, active=False), rate=0.0)
    loaded = eqx.tree_deserialise_leaves(save(model), like)
    assert summary(loaded) == [
        ("float", 2.5),
        ("int", 7),
        ("bool", True),
        ("float", float(np.float32(0.1))),  # the float32 that was saved
        ("str", "model"),
    ]
    # a plain Module has no array fields to convert: normalize returns it as is
    assert af.normalize(loaded) is loaded


def test_array_module_into_an_int_like_leaf_truncates_silently():
    # equinox calls type(like_leaf)(value): an int `like` leaf truncates a float.
    model = Model(Layer(weight=0.25, steps=7, active=True), rate=1.75)
    like = PlainModel(PlainLayer(weight=0, steps=0, active=False), rate=0)
    loaded = eqx.tree_deserialise_leaves(save(model), like)
    assert loaded.layer.weight == 0 and type(loaded.layer.weight) is int
    assert loaded.rate == 1


def test_round_trip_plain_to_array_module_and_back_keeps_values():
    plain = PlainModel(PlainLayer(weight=-3.25, steps=12, active=False), rate=0.5)
    model = eqx.tree_deserialise_leaves(
        save(plain), Model(Layer(weight=0.0, steps=0, active=False), rate=0.0)
    )
    back = eqx.tree_deserialise_leaves(save(model), plain)
    assert summary(back) == summary(plain)
