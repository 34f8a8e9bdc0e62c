import dataclasses

import equinox as eqx
import jax.numpy as jnp
import jax.tree_util as jtu
import optax
from jaxtyping import Array, Float

from arrayfield.diagnostics._paths import bind_arguments, key_to_str, path_to_str, walk


class Morph(eqx.Module):
    size: Float[Array, ""]


class Source(eqx.Module):
    morph: Morph
    flux: float


class Scene(eqx.Module):
    sources: list
    label: str = eqx.field(static=True, default="scene")


def _scene() -> Scene:
    return Scene([Source(Morph(jnp.ones(())), 1.0), Source(Morph(jnp.ones(())), 2.0)])


def test_each_key_type_is_written_as_python_would_index_it():
    assert key_to_str(jtu.GetAttrKey("size")) == ".size"
    assert key_to_str(jtu.SequenceKey(1)) == "[1]"
    assert key_to_str(jtu.DictKey("lr")) == '["lr"]'
    assert key_to_str(jtu.DictKey(3)) == "[3]"
    assert key_to_str(jtu.FlattenedIndexKey(2)) == "[2]"


def test_path_of_a_leaf_nested_in_modules_in_a_list():
    leaves, _ = walk(_scene(), "scene")
    assert [leaf.path for leaf in leaves] == [
        "scene.sources[0].morph.size",
        "scene.sources[0].flux",
        "scene.sources[1].morph.size",
        "scene.sources[1].flux",
    ]


def test_optax_state_paths_use_field_names():
    state = optax.adam(1e-3).init({"w": jnp.ones(2)})
    leaves, _ = walk(state, "opt_state")
    assert [leaf.path for leaf in leaves] == [
        "opt_state[0].count",
        'opt_state[0].mu["w"]',
        'opt_state[0].nu["w"]',
    ]


def test_direct_module_fields_carry_their_dataclass_field():
    leaves, _ = walk(_scene(), "scene")
    flux = next(leaf for leaf in leaves if leaf.path == "scene.sources[1].flux")
    assert flux.field is not None
    assert flux.field.where == "Source.flux"
    assert flux.field.annotation is float
    in_list = walk({"xs": [1.0]}, "d")[0][0]
    assert in_list.path == 'd["xs"][0]' and in_list.field is None


def test_static_fields_are_reported_separately():
    _, statics = walk(_scene(), "scene")
    assert [(s.path, s.value) for s in statics] == [("scene.label", "scene")]
    assert dataclasses.is_dataclass(statics[0].field.owner)


def test_arguments_are_named_by_the_function_signature():
    def step(scene, opt_state, *args, **kwargs):
        pass

    named = bind_arguments(step, (1, 2, 3), {"lr": 0.1})
    assert named == {"scene": 1, "opt_state": 2, "args": (3,), "kwargs": {"lr": 0.1}}
    assert path_to_str("kwargs", (jtu.DictKey("lr"),)) == 'kwargs["lr"]'


def test_arguments_fall_back_to_args_and_kwargs_when_they_do_not_bind():
    def one(x):
        pass

    assert bind_arguments(one, (1, 2), {}) == {"args": (1, 2), "kwargs": {}}
