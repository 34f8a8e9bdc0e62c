import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jaxtyping import Array, Float

import arrayfield as af


class Morph(eqx.Module):
    size: Float[Array, ""]
    profile: object


class Source(eqx.Module):
    morph: Morph
    flux: float
    name: str


class Scene(eqx.Module):
    sources: list
    mask: jnp.ndarray = eqx.field(static=True)


class CleanSource(af.ArrayModule):
    size: Float[Array, ""]
    flux: Float[Array, ""]


def _hazardous_scene() -> Scene:
    with pytest.warns(UserWarning, match="static"):
        return Scene(
            sources=[
                Source(Morph(jnp.asarray(1.0), jax.nn.relu), 2.0, "a"),
                Source(Morph(3, functools.partial(max, 1)), np.float32(1), "b"),
            ],
            mask=jnp.ones(2),
        )


def test_each_hazard_in_a_nested_scene_is_found_with_its_path_and_kind():
    findings = af.audit(_hazardous_scene(), name="scene")
    assert [(f.path, f.kind) for f in findings] == [
        ("scene.sources[0].flux", "python-scalar"),
        ("scene.sources[1].morph.size", "python-scalar"),
        ("scene.sources[1].flux", "numpy-scalar"),
        ("scene.sources[0].name", "hashed-leaf"),
        ("scene.sources[1].morph.profile", "hashed-leaf"),
        ("scene.sources[1].name", "hashed-leaf"),
        ("scene.sources[0].morph.size", "weak-type"),
        ("scene.mask", "static-array"),
    ]


def test_scalar_hints_depend_on_the_field_annotation():
    by_path = {f.path: f for f in af.audit(_hazardous_scene(), name="scene")}
    array_field = by_path["scene.sources[1].morph.size"]
    assert array_field.value == 3
    assert "Morph.size is annotated Float[Array, ''] but holds a Python number" in (
        array_field.hint
    )
    assert "subclass af.ArrayModule" in array_field.hint
    float_field = by_path["scene.sources[0].flux"].hint
    assert 'Source.flux is annotated float: annotate it Float[Array, ""]' in float_field
    assert "eqx.field(static=True)" in float_field
    assert "Scene.mask is static=True but holds an array" in by_path["scene.mask"].hint


def test_module_level_functions_are_stable_and_not_reported():
    paths = [f.path for f in af.audit(_hazardous_scene(), name="scene")]
    assert "scene.sources[0].morph.profile" not in paths  # jax.nn.relu


def test_report_groups_by_kind_one_line_per_finding():
    report = str(af.audit(_hazardous_scene(), name="scene"))
    lines = report.splitlines()
    assert lines[0] == "af.audit: 8 recompile hazards in scene"
    assert lines[1].startswith("python-scalar (2): Python scalars in traced positions")
    assert lines[2].startswith("  scene.sources[0].flux = 2.0: ")
    assert "  scene.sources[0].morph.size = weak f32[]: " in report
    headings = [line.split(" (")[0] for line in lines if not line.startswith(" ")]
    assert headings[1:] == [
        "python-scalar",
        "numpy-scalar",
        "hashed-leaf",
        "weak-type",
        "static-array",
    ]


def test_clean_tree_of_array_modules_and_optax_state_prints_clean():
    params = {"sources": [CleanSource(size=1, flux=2.0), CleanSource(size=2, flux=1)]}
    opt_state = optax.adam(1e-3).init(params)
    findings = af.audit({"params": params, "opt_state": opt_state}, name="state")
    assert findings == []
    assert str(findings) == "af.audit: state is clean: no recompile hazards found."
    af.assert_clean(opt_state)


def test_optax_state_with_python_count_is_reported_at_its_path():
    state = optax.adam(1e-3).init({"w": jnp.ones(2)})
    state = (state[0]._replace(count=0), *state[1:])
    findings = af.audit(state, name="opt_state")
    assert [(f.path, f.kind) for f in findings] == [
        ("opt_state[0].count", "python-scalar")
    ]


def test_dicts_and_lists_of_python_values():
    findings = af.audit({"lr": 0.1, "ids": ["a"], "fn": lambda x: x}, name="cfg")
    assert [(f.path, f.kind) for f in findings] == [
        ('cfg["lr"]', "python-scalar"),
        ('cfg["fn"]', "hashed-leaf"),
        ('cfg["ids"][0]', "hashed-leaf"),
    ]
    assert "jnp.asarray(x, dtype=...)" in findings[0].hint


def test_assert_clean_raises_an_assertion_error_with_the_report():
    with pytest.raises(af.AuditError) as info:
        af.assert_clean({"step": 1}, name="state")
    assert isinstance(info.value, AssertionError)
    assert str(info.value).startswith("af.audit: 1 recompile hazard in state\n")
    assert 'state["step"] = 1' in str(info.value)


def test_audit_does_not_change_the_tree():
    scene = _hazardous_scene()
    before = jax.tree_util.tree_structure(scene)
    af.audit(scene)
    assert jax.tree_util.tree_structure(scene) == before
