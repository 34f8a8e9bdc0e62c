"""Fit 8 small fields one after another with scarlet2's own fit routine.

Usage: python harness.py MODE [--explain] [--tag TAG]
  MODE = eqx : scarlet2 as shipped (scarlet2.infer._make_step is eqx.filter_jit)
  MODE = af  : scarlet2.infer._make_step is af.filter_jit(..., share_numbers=True)
  MODE = af0 : replaced by af.filter_jit(...) with its defaults (no share_numbers)
  --explain  : the whole 8-field loop runs inside `with af.explain_retraces():`

Writes results_<tag>.json (per field: _make_step compiles, all compiles, wall time,
final loss) and params_<tag>.npz (fitted parameter arrays per field).
"""

import argparse
import json
import os
import sys
import time
import warnings
from functools import partial

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
import scarlet2
import scarlet2.infer
from numpyro.distributions import constraints
from scarlet2 import init
from scarlet2.frame import Frame
from scarlet2.module import Parameter, Parameters, relative_step
from scarlet2.morphology import GaussianMorphology
from scarlet2.observation import Observation
from scarlet2.psf import ArrayPSF
from scarlet2.scene import Scene
from scarlet2.source import PointSource, Source
from scarlet2.validation_utils import set_validation

import arrayfield as af

p = argparse.ArgumentParser()
p.add_argument("mode", choices=["eqx", "af", "af0"])
p.add_argument("--explain", action="store_true")
p.add_argument("--tag", default=None)
p.add_argument("--steps", type=int, default=100)
p.add_argument("--fields", type=int, default=8)
p.add_argument(
    "--werror",
    action="store_true",
    help="RetraceWarning as an error, as pytest -W error::arrayfield.RetraceWarning",
)
args = p.parse_args()
tag = args.tag or (args.mode + ("_explain" if args.explain else ""))

set_validation(False)  # scarlet2's validation prints reports; off for clean timings

if args.mode == "af":
    original = scarlet2.infer._make_step.__wrapped__
    scarlet2.infer._make_step = af.filter_jit(original, share_numbers=True)
elif (
    args.mode == "af0"
):  # af.filter_jit with its defaults (no share_numbers), for comparison
    scarlet2.infer._make_step = af.filter_jit(scarlet2.infer._make_step.__wrapped__)

# record every warning's category (the text itself goes to stderr as usual)
_orig_showwarning = warnings.showwarning
categories = []


def _showwarning(message, category, filename, lineno, file=None, line=None):
    categories.append(f"{category.__module__}.{category.__qualname__}")
    _orig_showwarning(message, category, filename, lineno, file, line)


warnings.showwarning = _showwarning
if (
    not sys.warnoptions
):  # leave -W filters (e.g. -W error::arrayfield.RetraceWarning) in charge
    warnings.simplefilter("always")
# scarlet2 0.5.1 on jax 0.10.2 warns per Source (module.py:135): noise here
warnings.filterwarnings("ignore", category=DeprecationWarning, module="scarlet2")
if args.werror:
    warnings.simplefilter("error", af.RetraceWarning)

H = W = 50
C = 3
PSF_SIGMAS = [1.4, 1.5, 1.6]
PSF_SIZE = 25


def gauss2d(shape, cy, cx, sigma):
    y = np.arange(shape[0])[:, None]
    x = np.arange(shape[1])[None, :]
    return np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * sigma**2)) / (
        2 * np.pi * sigma**2
    )


def psf_cube():
    c = PSF_SIZE // 2
    return np.stack(
        [gauss2d((PSF_SIZE, PSF_SIZE), c, c, s) for s in PSF_SIGMAS]
    ).astype(np.float32)


# per-field source positions (y, x); field index 3 (the 4th field) has a galaxy at
# x = 4, so that its 15x15 box is clipped by the frame's left edge.
rng = np.random.default_rng(20240607)


def field_positions(f):
    while True:
        pos = rng.uniform(12, 38, size=(3, 2))
        d = np.sqrt(((pos[:, None] - pos[None]) ** 2).sum(-1)) + 100 * np.eye(3)
        if d.min() > 9:
            break
    if f == 3:
        pos[2] = (pos[2][0], 4.3)
    return pos


# (spectrum, intrinsic sigma) per source slot: slot 0 a star, slots 1-2 galaxies
SED = [
    np.array([30.0, 40.0, 35.0]),
    np.array([20.0, 25.0, 30.0]),
    np.array([15.0, 12.0, 10.0]),
]
SIG = [0.0, 2.0, 1.6]
NOISE = 0.05


def make_field(f):
    pos = field_positions(f)
    img = np.zeros((C, H, W))
    for (cy, cx), sed, sg in zip(pos, SED, SIG, strict=True):
        for c in range(C):
            s = np.sqrt(sg**2 + PSF_SIGMAS[c] ** 2)
            img[c] += sed[c] * gauss2d((H, W), cy, cx, s)
    noise_rng = np.random.default_rng(1000 + f)
    img += noise_rng.normal(0, NOISE, img.shape)
    weights = np.full(img.shape, 1 / NOISE**2)
    obs = Observation(
        data=jnp.asarray(img),
        weights=jnp.asarray(weights),
        psf=ArrayPSF(jnp.asarray(psf_cube())),
    )
    return obs, pos


def build_scene(obs, pos):
    model_frame = Frame.from_observations(obs)
    centers = jnp.asarray(pos)
    with Scene(model_frame) as scene:
        for i, center in enumerate(centers):
            if i == 0:
                spectrum = init.pixel_spectrum(obs, center, correct_psf=True)
                PointSource(center, spectrum)
            else:
                try:
                    spectrum, morph = init.from_gaussian_moments(
                        obs, center, box_sizes=[15], min_corr=0.99
                    )
                except ValueError:
                    # moments fail for a box that leaves the frame (the edge source):
                    # fall back, as scarlet2's own conftest does, but keep the 15x15 box
                    spectrum = init.pixel_spectrum(obs, center)
                    morph = GaussianMorphology(2.0, shape=(15, 15))()
                    morph = jnp.clip(morph / morph.max(), 1e-6, 1 - 1e-6)
                Source(center, spectrum, morph)
    spec_step = partial(relative_step, factor=0.05)
    morph_step = partial(relative_step, factor=1e-3)
    with Parameters(scene):
        for i in range(len(scene.sources)):
            Parameter(
                scene.sources[i].spectrum,
                name=f"spectrum:{i}",
                constraint=constraints.positive,
                stepsize=spec_step,
            )
    with scene.parameters:
        for i in range(len(scene.sources)):
            if i == 0:
                Parameter(scene.sources[i].center, name=f"center:{i}", stepsize=0.1)
            else:
                Parameter(
                    scene.sources[i].morphology,
                    name=f"morph:{i}",
                    constraint=constraints.unit_interval,
                    stepsize=morph_step,
                )
    return scene


def run_all():
    results = []
    params = {}
    for f in range(args.fields):
        obs, pos = make_field(f)
        scene = build_scene(obs, pos)
        boxes = [(tuple(s.bbox.origin), tuple(s.bbox.shape)) for s in scene.sources]
        with af.count_compiles() as count:
            t0 = time.perf_counter()
            scene_ = scene.fit(obs, max_iter=args.steps, e_rel=0.0, progress_bar=False)
            jax.block_until_ready(jax.tree_util.tree_leaves(scene_))
            dt = time.perf_counter() - t0
        compiled = dict(count.compiled)
        step_compiles = sum(v for k, v in compiled.items() if "_make_step" in k)
        loss = float(-obs.log_likelihood(scene_()))
        vals = scene_.get()
        for k, v in vals.items():
            params[f"f{f}/{k}"] = np.asarray(v)
        results.append(
            dict(
                field=f + 1,
                boxes=boxes,
                step_compiles=step_compiles,
                all_compiles=count.compiles,
                compiled=compiled,
                time_s=dt,
                loss=loss,
            )
        )
        print(
            f"field {f + 1}: _make_step compiles={step_compiles} all={count.compiles} "
            f"time={dt:.3f}s loss={loss:.6f} boxes={boxes}",
            file=sys.stderr,
            flush=True,
        )
    return results, params


print(
    f"=== mode={args.mode} explain={args.explain} jax={jax.__version__} "
    f"scarlet2={scarlet2.__version__}",
    file=sys.stderr,
    flush=True,
)
t_all = time.perf_counter()
if args.explain:
    with af.explain_retraces():
        results, params = run_all()
else:
    results, params = run_all()
t_all = time.perf_counter() - t_all
print(
    f"=== total {t_all:.2f}s; warning categories: {categories}",
    file=sys.stderr,
    flush=True,
)
here = os.getcwd()  # results beside where it runs, not in the checkout
with open(os.path.join(here, f"results_{tag}.json"), "w") as fh:
    json.dump(
        dict(results=results, total_s=t_all, categories=categories),
        fh,
        indent=1,
        default=str,
    )
np.savez(os.path.join(here, f"params_{tag}.npz"), **params)
