"""A small scene package modelled on fitting many fields of the sky (scarlet2).

`build_scene(field, fixes)` builds one field's scene with every cause of a
recompile the real job had; `fit_fields(jit, K, steps, fixes)` fits K of them
under one jitted step and counts its traces. `tests/test_many_fields.py` holds
the exact counts; `benchmarks/many_fields.py` times them.
"""

from .fit import FieldRun, Fitter, fit_fields, loss, step
from .scene import (
    ALL_FIXES,
    NO_FIXES,
    EqualPrior,
    Fixes,
    Prior,
    Psf,
    Scene,
    Source,
    Wcs,
    build_scene,
    observed,
    relative_step,
    render,
)

__all__ = [
    "ALL_FIXES",
    "NO_FIXES",
    "EqualPrior",
    "FieldRun",
    "Fitter",
    "Fixes",
    "Prior",
    "Psf",
    "Scene",
    "Source",
    "Wcs",
    "build_scene",
    "fit_fields",
    "loss",
    "observed",
    "relative_step",
    "render",
    "step",
]
