"""Many fields, one compile: tests/many_fields fitted under each jit, counted.

K = 8 fields, each built with every cause of a recompile the real job had
(per-field partial step sizes, a per-instance lambda renderer, a bound method of
an equal per-field helper, identity-compared priors, a foreign WCS object, an
`id`-derived name). `eqx.filter_jit` compiles the step once per field whatever is
fixed (its callables compare by identity); `af.filter_jit` shares the callables,
so once the three fixes for the rest are applied it compiles once for all K
fields, and leaving out any one fix costs a compile per field again. The fits
agree bitwise across every configuration.
"""

from __future__ import annotations

import dataclasses
import functools

import equinox as eqx
import jax
import numpy as np
import pytest

import arrayfield as af
from arrayfield import _callable_key
from many_fields import ALL_FIXES, NO_FIXES, Fixes, fit_fields

# On equinox 0.12 (or a JAX whose jax.jit hides its function) af.filter_jit keys
# callables exactly as equinox does: there is nothing to share (test_jit.py covers it).
pytestmark = pytest.mark.skipif(
    not _callable_key.SUPPORTED,
    reason="callable sharing needs equinox >= 0.13 and jax.jit's parts readable",
)

K = 8
STEPS = 3
JITS = {
    "eqx.filter_jit": eqx.filter_jit,
    "af.filter_jit": af.filter_jit,
    "af.filter_jit(share_callables=False)": functools.partial(
        af.filter_jit, share_callables=False
    ),
}


@functools.cache
def fitted(jit: str, fixes: Fixes, fields: int = K):
    return fit_fields(JITS[jit], fields, STEPS, fixes)


def _assert_same_fits(runs_a, runs_b) -> None:
    for a, b in zip(runs_a, runs_b, strict=False):
        assert a.losses == b.losses
        arrays_a = jax.tree_util.tree_leaves(eqx.filter(a.scene, eqx.is_array))
        arrays_b = jax.tree_util.tree_leaves(eqx.filter(b.scene, eqx.is_array))
        for x, y in zip(arrays_a, arrays_b, strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y), strict=True)


@pytest.mark.parametrize(
    ("jit", "fixes", "traces"),
    [
        ("eqx.filter_jit", NO_FIXES, K),
        ("eqx.filter_jit", ALL_FIXES, K),  # its callables differ per field
        ("af.filter_jit", NO_FIXES, K),  # priors, WCS and name still differ
        ("af.filter_jit", ALL_FIXES, 1),  # many fields, one compile
        ("af.filter_jit(share_callables=False)", ALL_FIXES, K),
    ],
)
def test_trace_counts_per_configuration(jit, fixes, traces):
    _runs, count = fitted(jit, fixes)
    assert count == traces


@pytest.mark.parametrize("left_out", [f.name for f in dataclasses.fields(Fixes)])
def test_each_fix_left_out_costs_a_compile_per_field(left_out):
    fixes = dataclasses.replace(ALL_FIXES, **{left_out: False})
    _runs, count = fitted("af.filter_jit", fixes, 2)
    assert count == 2


def test_fits_agree_bitwise_across_jits_and_fixes():
    reference, _ = fitted("eqx.filter_jit", NO_FIXES)
    for jit in JITS:
        for fixes in (NO_FIXES, ALL_FIXES):
            runs, _ = fitted(jit, fixes)
            _assert_same_fits(reference, runs)
    for left_out in dataclasses.fields(Fixes):
        fixes = dataclasses.replace(ALL_FIXES, **{left_out.name: False})
        _assert_same_fits(reference, fitted("af.filter_jit", fixes, 2)[0])


def test_every_field_keeps_its_own_objects_under_one_compile():
    runs, count = fitted("af.filter_jit", ALL_FIXES)
    assert count == 1
    renderers = {id(run.scene.renderer) for run in runs}
    psfs = {id(run.scene.psf.__self__) for run in runs}
    assert len(renderers) == len(psfs) == K  # not the first field's, K times
    assert all(run.losses[-1] < run.losses[0] for run in runs)  # the fits fit
