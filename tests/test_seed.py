"""The scenario from the user report (shared/seed/000_...): a counter field that
starts as a Python 0 and is stepped through an `eqx.filter_jit` function."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import arrayfield as af


def make_step():
    traces = []

    @eqx.filter_jit
    def step(scene, x):
        traces.append(1)  # runs only while tracing
        return jax.tree_util.tree_map(lambda s: s + x, scene)

    return step, traces


class PlainScene(eqx.Module):
    x: np.array

    def __init__(self):
        self.x = 0


class ArrayScene(af.ArrayModule):
    x: np.array

    def __init__(self):
        self.x = 0


def run(scene, steps):
    step, traces = make_step()
    for _ in range(steps):
        scene = step(scene, 1)
    return scene, len(traces)


def test_seed_scenario_traces_once_over_100_steps():
    scene, traces = run(ArrayScene(), 100)
    assert traces == 1
    assert int(scene.x) == 100


def test_plain_module_retraces_every_step_for_comparison():
    scene, traces = run(PlainScene(), 5)
    assert traces == 5
    assert int(scene.x) == 5


def test_assert_max_traces_holds_for_array_module():
    @eqx.filter_jit
    @eqx.debug.assert_max_traces(max_traces=1)
    def step(scene):
        return jax.tree_util.tree_map(lambda s: s + 1, scene)

    scene = ArrayScene()
    for _ in range(20):
        scene = step(scene)
    assert int(scene.x) == 20


class Param(eqx.Module):
    value: jax.Array


class ArrayParam(af.ArrayModule):
    value: jax.Array


def test_plain_module_silently_reuses_a_trace_compiled_for_another_dtype():
    @eqx.filter_jit
    def double(p):
        return jnp.asarray(p.value) * 2

    assert double(Param(1)).dtype == jnp.int32
    # 1.5 hashes differently, but 1.0 hashes like 1: the int trace is reused.
    assert double(Param(1.0)).dtype == jnp.int32  # the hazard, on plain eqx.Module
    assert double(ArrayParam(1)).dtype == jnp.int32
    assert double(ArrayParam(1.0)).dtype == jnp.float32  # fixed by ArrayModule
