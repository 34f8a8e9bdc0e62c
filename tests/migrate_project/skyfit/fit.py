"""Fit each scene of a survey to its image with optax, counting compilations."""

import equinox as eqx
import jax.numpy as jnp
import optax

from .scene import build_scene

TRACES = []  # one entry each time `step` is traced, i.e. compiled

optimiser = optax.adam(0.05)


def loss(parameters, scene, image):
    return jnp.mean((scene.model(parameters) - image) ** 2)


@eqx.filter_jit
def step(parameters, state, scene, image):
    TRACES.append(type(scene).__name__)
    value, grads = eqx.filter_value_and_grad(loss)(parameters, scene, image)
    updates, state = optimiser.update(grads, state)
    return eqx.apply_updates(parameters, updates), state, value


def fit(scene, image, steps=5):
    parameters = scene.parameters
    state = optimiser.init(eqx.filter(parameters, eqx.is_array))
    for _ in range(steps):
        parameters, state, value = step(parameters, state, scene, image)
    return parameters, value


def main(n_scenes=3):
    for index in range(n_scenes):
        scene = build_scene(index)
        image = jnp.ones(scene.renderer.shape)
        fit(scene, image)
    return len(TRACES)


if __name__ == "__main__":
    print(main())
