"""Many fields, one compile: tests/many_fields fitted under each jit, counted.

K = 8 fields, each built with every cause of a recompile the real job had
(per-field partial step sizes, a per-instance lambda renderer, a bound method of
an equal per-field helper, identity-compared priors, a foreign WCS object, an
`id`-derived name). Every jit traces the step once per field: each field is a new
cache key, as under `eqx.filter_jit`. `eqx.filter_jit` also compiles once per
field; `af.filter_jit` finds that every later field's trace is the program the
first compiled, so it compiles once in total, with no change to the user's code
(none of the fixes is needed). XLA compiles are counted with JAX's
backend-compile events, not traces. The fits agree bitwise across every
configuration.
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import numpy as np
import pytest

import arrayfield as af
from arrayfield import _jax_private
from many_fields import ALL_FIXES, NO_FIXES, Fixes, fit_fields

# Where JAX does not show a traced jit's program, af.filter_jit compiles every
# trace, as equinox does (test_jit.py covers that).
pytestmark = pytest.mark.skipif(
    _jax_private.sharing_problem() is not None,
    reason="sharing compiles needs a JAX whose traced jits show their program",
)

K = 8
STEPS = 3
JITS = {
    "eqx.filter_jit": eqx.filter_jit,
    "af.filter_jit": af.filter_jit,
    "af.filter_jit(share_compiles=False)": functools.partial(
        af.filter_jit, share_compiles=False
    ),
}


@functools.cache
def fitted(jit: str, fixes: Fixes, fields: int = K):
    jax.clear_caches()  # also af.filter_jit's executables: each run starts cold
    return fit_fields(JITS[jit], fields, STEPS, fixes)


def _assert_same_fits(runs_a, runs_b) -> None:
    for a, b in zip(runs_a, runs_b, strict=False):
        assert a.losses == b.losses
        arrays_a = jax.tree_util.tree_leaves(eqx.filter(a.scene, eqx.is_array))
        arrays_b = jax.tree_util.tree_leaves(eqx.filter(b.scene, eqx.is_array))
        for x, y in zip(arrays_a, arrays_b, strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y), strict=True)


@pytest.mark.parametrize(
    ("jit", "fixes", "compiles"),
    [
        ("eqx.filter_jit", NO_FIXES, K),
        ("eqx.filter_jit", ALL_FIXES, K),  # its callables differ per field
        ("af.filter_jit", NO_FIXES, 1),  # many fields, one compile, code unchanged
        ("af.filter_jit", ALL_FIXES, 1),
        ("af.filter_jit(share_compiles=False)", NO_FIXES, K),
    ],
)
def test_traces_per_field_and_compiles_per_configuration(jit, fixes, compiles):
    _runs, traces, compiled = fitted(jit, fixes)
    assert traces == K  # every field is a new cache key, for every jit
    assert compiled == compiles


@pytest.mark.parametrize("left_out", [f.name for f in dataclasses.fields(Fixes)])
def test_no_fix_is_needed_for_one_compile(left_out):
    fixes = dataclasses.replace(ALL_FIXES, **{left_out: False})
    _runs, traces, compiled = fitted("af.filter_jit", fixes, 2)
    assert (traces, compiled) == (2, 1)


def test_fits_agree_bitwise_across_jits_and_fixes():
    reference, _, _ = fitted("eqx.filter_jit", NO_FIXES)
    for jit in JITS:
        for fixes in (NO_FIXES, ALL_FIXES):
            runs, _, _ = fitted(jit, fixes)
            _assert_same_fits(reference, runs)
    for left_out in dataclasses.fields(Fixes):
        fixes = dataclasses.replace(ALL_FIXES, **{left_out.name: False})
        _assert_same_fits(reference, fitted("af.filter_jit", fixes, 2)[0])


def test_every_field_keeps_its_own_objects_under_one_compile():
    runs, _, compiled = fitted("af.filter_jit", NO_FIXES)
    assert compiled == 1
    renderers = {id(run.scene.renderer) for run in runs}
    psfs = {id(run.scene.psf.__self__) for run in runs}
    assert len(renderers) == len(psfs) == K  # not the first field's, K times
    assert all(run.losses[-1] < run.losses[0] for run in runs)  # the fits fit
