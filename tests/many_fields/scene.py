"""One scene per field of the sky, with every cause of a recompile the real job had.

Modelled on scarlet2 (sources fitted per field): each field builds its own
`Scene`, and each scene carries

- per-source step sizes `functools.partial(relative_step, factor=0.1)`, new per
  field (`eqx.filter_jit` compares them by identity; `af.filter_jit` shares them);
- a renderer `lambda image: image` set per instance (shared by `af.filter_jit`);
- the bound method `psf.broaden` of a per-field `Psf`, a helper with value
  equality (shared by `af.filter_jit`: equal `__self__`);
- per-source `Prior` objects compared by identity, as scarlet2's parameters are
  (fix: give them value equality, `EqualPrior`);
- a `Wcs`, a foreign object compared by identity, as astropy's WCS is (fix: keep
  it out of the jitted arguments, beside the scene);
- a name `hex(id(...))`, a string that differs per scene (fix: a constant name).

`Fixes` says which of the three fixes a scene is built with.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

import arrayfield as af

BANDS = 2
PIXELS = 12
SOURCES = 2


def relative_step(x: jax.Array, factor: float) -> jax.Array:
    """scarlet2's step size: a fraction of the parameter's mean magnitude."""
    return factor * jnp.mean(jnp.abs(x))


@dataclasses.dataclass(frozen=True)
class Psf:
    """The field's point-spread function: a helper with value equality."""

    width: float

    def broaden(self, size: jax.Array) -> jax.Array:
        return jnp.sqrt(size**2 + self.width**2)


class Prior:
    """A Gaussian prior on fluxes, compared by identity (no `__eq__`)."""

    def __init__(self, sigma: float):
        self.sigma = sigma

    def log_prob(self, flux: jax.Array) -> jax.Array:
        return -0.5 * jnp.sum((flux / self.sigma) ** 2)


class EqualPrior(Prior):
    """The fix: the same prior with value equality, so equal priors are one key."""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.sigma == self.sigma

    def __hash__(self) -> int:
        return hash((type(self), self.sigma))


class Wcs:
    """Stands in for astropy's WCS: built per field, compared by identity."""

    def __init__(self, ra: float, dec: float):
        self.ra = ra
        self.dec = dec


class Source(af.ArrayModule):
    flux: Float[Array, " bands"]
    centre: Float[Array, " 2"]
    size: Float[Array, ""]
    prior: Prior
    step_size: Callable[[jax.Array], jax.Array]


class Scene(af.ArrayModule):
    sources: list[Source]
    renderer: Callable[[jax.Array], jax.Array]
    psf: Callable[[jax.Array], jax.Array]
    wcs: Wcs | None
    name: str


@dataclasses.dataclass(frozen=True)
class Fixes:
    """Which of the fixes for what `af.filter_jit` cannot share are applied."""

    helper_equality: bool = False  # priors with value equality
    wcs_outside: bool = False  # the WCS kept beside the scene, not in it
    no_id_string: bool = False  # a constant name instead of hex(id(...))


NO_FIXES = Fixes()
ALL_FIXES = Fixes(helper_equality=True, wcs_outside=True, no_id_string=True)


def field_truth(field: int) -> dict[str, np.ndarray]:
    """The true parameters of one field's sources (a seeded draw per field)."""
    rng = np.random.default_rng(field)
    return {
        "flux": rng.uniform(1.0, 3.0, (SOURCES, BANDS)),
        "centre": rng.uniform(3.0, PIXELS - 3.0, (SOURCES, 2)),
        "size": rng.uniform(1.0, 2.0, SOURCES),
    }


def build_scene(field: int, fixes: Fixes = NO_FIXES) -> tuple[Scene, Wcs]:
    """The starting scene of one field (fluxes and centres off the truth) and its
    WCS. With `fixes.wcs_outside` the scene holds no WCS; the caller keeps it."""
    truth = field_truth(field)
    prior_class = EqualPrior if fixes.helper_equality else Prior
    psf = Psf(width=0.8)  # a new helper per field, equal in every field
    wcs = Wcs(ra=150.0 + 0.1 * field, dec=2.0)
    sources = [
        Source(
            flux=(truth["flux"][i] * 0.7).astype(np.float32),
            centre=(truth["centre"][i] + 0.5).astype(np.float32),
            size=float(truth["size"][i]),
            prior=prior_class(sigma=10.0),
            step_size=functools.partial(relative_step, factor=0.1),
        )
        for i in range(SOURCES)
    ]
    # The name scarlet2 gives each scene, unique per object (here the scene's own
    # Psf, alive as long as the scene): so it differs per field.
    name = "scene" if fixes.no_id_string else hex(id(psf))
    scene = Scene(
        sources=sources,
        renderer=lambda image: image,
        psf=psf.broaden,
        wcs=None if fixes.wcs_outside else wcs,
        name=name,
    )
    return scene, wcs


_GRID = np.stack(np.meshgrid(np.arange(PIXELS), np.arange(PIXELS), indexing="ij"))


def render(scene: Scene) -> jax.Array:
    """The model image, `(bands, pixels, pixels)`."""
    image = jnp.zeros((BANDS, PIXELS, PIXELS))
    for source in scene.sources:
        width = scene.psf(source.size)
        offset = _GRID - source.centre[:, None, None]
        blob = jnp.exp(-jnp.sum(offset**2, axis=0) / (2 * width**2))
        image = image + source.flux[:, None, None] * blob
    return scene.renderer(image)


def observed(field: int) -> jax.Array:
    """The field's data: the true scene rendered, with seeded noise."""
    truth = field_truth(field)
    true_scene = Scene(
        sources=[
            Source(
                flux=truth["flux"][i].astype(np.float32),
                centre=truth["centre"][i].astype(np.float32),
                size=float(truth["size"][i]),
                prior=Prior(10.0),
                step_size=functools.partial(relative_step, factor=0.1),
            )
            for i in range(SOURCES)
        ],
        renderer=lambda image: image,
        psf=Psf(0.8).broaden,
        wcs=None,
        name="truth",
    )
    noise = np.random.default_rng(1000 + field).normal(0.0, 0.05, _GRID.shape[1:])
    return render(true_scene) + jnp.asarray(noise, jnp.float32)
