"""Fit a small astronomical scene with optax, the way the people behind the original
report do: a Scene of Sources, each with a flux, a position and a Gaussian width,
built from plain Python numbers and fitted in an `eqx.filter_jit` step.

`af.audit` shows what would recompile before anything is jitted, and
`af.explain_retraces` watches the loop: with `af.ArrayModule` it stays silent, and
the step traces once.

Needs optax (the `examples` extra: pip install -e '.[examples]').

Run: python examples/optax_fit.py
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float

import arrayfield as af

SIZE = 32


class Source(af.ArrayModule):
    flux: af.Field[Float[Array, ""]]  # af.Field: type checkers accept numbers
    position: af.Field[Float[Array, "2"]]
    width: af.Field[Float[Array, ""]]
    name: str = eqx.field(static=True, default="source")

    def render(self, grid: Float[Array, "2 h w"]) -> Float[Array, "h w"]:
        offset = grid - self.position[:, None, None]
        r2 = jnp.sum(offset**2, axis=0) / self.width**2
        return self.flux * jnp.exp(-0.5 * r2)


class Scene(af.ArrayModule):
    sources: list[Source]
    background: af.Field[Float[Array, ""]] = af.field(default=0)

    def render(self) -> Float[Array, "h w"]:
        axis = jnp.arange(SIZE, dtype=jnp.float32)
        grid = jnp.stack(jnp.meshgrid(axis, axis, indexing="xy"))
        image = sum(s.render(grid) for s in self.sources)
        return image + self.background


def make_scene(
    fluxes: list[float],
    positions: list[tuple[float, float]],
    widths: list[float],
    background: float,
) -> Scene:
    sources = [
        Source(flux=f, position=p, width=w, name=f"star{i}")
        for i, (f, p, w) in enumerate(zip(fluxes, positions, widths, strict=True))
    ]
    return Scene(sources=sources, background=background)


def main() -> None:
    truth = make_scene([10, 6], [(10, 12), (22, 18)], [2.0, 3.0], 1)
    observed = truth.render() + 0.05 * jax.random.normal(
        jax.random.key(0), (SIZE, SIZE)
    )
    # A first guess, from plain Python numbers, as a user would type it.
    scene = make_scene([5, 5], [(11, 11), (21, 19)], [2.5, 2.5], 0)
    print(af.audit(scene))

    optimiser = optax.adam(0.1)
    state = optimiser.init(eqx.filter(scene, eqx.is_inexact_array))
    traces = 0

    @eqx.filter_jit
    def step(
        scene: Scene, state: optax.OptState
    ) -> tuple[Scene, optax.OptState, Array]:
        nonlocal traces
        traces += 1  # runs only while tracing

        def loss(scene: Scene) -> Array:
            return jnp.mean((scene.render() - observed) ** 2)

        value, grads = eqx.filter_value_and_grad(loss)(scene)
        updates, state = optimiser.update(grads, state)
        return eqx.apply_updates(scene, updates), state, value

    with af.explain_retraces():
        for i in range(300):
            scene, state, value = step(scene, state)
            if i % 100 == 0:
                print(f"step {i:3d}: loss {float(value):.4f}")
    print(f"final loss {float(value):.4f} after {traces} trace")
    for source in scene.sources:
        print(
            f"{source.name}: flux {float(source.flux):.2f}, "
            f"position {[round(float(p), 2) for p in source.position]}, "
            f"width {float(source.width):.2f}"
        )
    assert traces == 1


if __name__ == "__main__":
    main()
