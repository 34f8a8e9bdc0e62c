"""Programs that differ only in integer offsets share one generalised executable,
with `af.filter_jit(share_offsets=True)`.

`tests/boxed_fields` is modelled on the client's rendering: sources in boxes of
one shape, added into a frame at per-field Python-int origins, fitted with an
optax step. Every jit traces once per field (the origins are static);
eqx.filter_jit compiles once per field, and so does af.filter_jit by default;
with `share_offsets=True` it compiles twice in all: the first field's own
program, then at the second field one program that takes the origins as
inputs, which runs every later field. On this fixture the results are bitwise
eqx.filter_jit's, per field. They need not be in general (XLA optimises a
program with constant offsets differently): on generated programs (random
starts and operations) results are compared within a few units in the last
place, and the test of the default checks that it stays exact.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import equinox as eqx
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, note, settings

import arrayfield as af
from arrayfield import _internals, _offsets
from boxed_fields import BOX, build_scene, fit_fields, loss, observed
from helpers import assert_bitwise, compiles_of

pytestmark = pytest.mark.skipif(
    not _internals.can_share_compiles(),
    reason="sharing compiles needs a JAX whose traced jits show their program",
)

K = 8
STEPS = 3


def fits(jit: Callable[..., Any], box: int = BOX, fields: int = K):
    jax.clear_caches()  # also af.filter_jit's executables: each run starts cold
    return fit_fields(jit, fields, STEPS, box)


SHARING = functools.partial(af.filter_jit, share_offsets=True)


def test_eight_fields_at_other_origins_compile_twice_bitwise_as_eqx():
    eqx_runs, eqx_traces, eqx_compiles = fits(eqx.filter_jit)
    af_runs, af_traces, af_compiles = fits(SHARING)
    assert (eqx_traces, eqx_compiles) == (K, K)
    # The first field's own program, then one for every field after it.
    assert (af_traces, af_compiles) == (K, 2)
    for a, b in zip(eqx_runs, af_runs, strict=True):
        assert a.losses == b.losses
        assert_bitwise(a.scene, b.scene)


@pytest.mark.parametrize(
    "options",
    [{}, {"share_compiles": False}, {"share_compiles": False, "share_offsets": True}],
)
def test_by_default_every_field_compiles_its_own(options):
    _, traces, compiles = fits(functools.partial(af.filter_jit, **options))
    assert (traces, compiles) == (K, K)


def test_boxes_of_another_shape_are_another_program():
    def both_shapes(jit):
        fitted = [fit_fields(jit, 3, STEPS, box) for box in (BOX, BOX - 4)]
        return [run for runs, _, _ in fitted for run in runs], [
            compiles for _, _, compiles in fitted
        ]

    jax.clear_caches()
    af_runs, af_compiles = both_shapes(SHARING)
    jax.clear_caches()
    eqx_runs, _ = both_shapes(eqx.filter_jit)
    # Each shape: its first field's own program and one generalised program.
    assert af_compiles == [2, 2]
    for a, b in zip(eqx_runs, af_runs, strict=True):
        assert a.losses == b.losses
        assert_bitwise(a.scene, b.scene)


# -- each operation generalised, on random offsets -------------------------------------


def _placed(kind: str, frame: jax.Array, box: jax.Array, y: int, x: int) -> Any:
    """`frame` with `box` placed into it at `(y, x)`, or read out of it there."""
    h, w = box.shape
    if kind == "add":  # scatter-add; its gradient is a gather
        return frame.at[y : y + h, x : x + w].add(box)
    if kind == "set":  # scatter
        return frame.at[y : y + h, x : x + w].set(box)
    if kind == "mul":  # scatter-mul
        return frame.at[y : y + h, x : x + w].multiply(box)
    if kind == "slice":  # slice; its gradient is a pad
        return frame + jnp.sum(frame[y : y + h, x : x + w] * box)
    if kind == "dynamic_slice":  # literal starts
        return frame * jnp.sum(jax.lax.dynamic_slice(frame, (y, x), (h, w)) + box)
    if kind == "dynamic_update_slice":
        return jax.lax.dynamic_update_slice(frame, box, (y, x))
    if kind == "element":  # a slice of one element, squeezed
        return frame - frame[y, x] * jnp.sum(box)
    if kind == "pad":  # grows; its gradient is a pad that crops
        config = ((y, 12 - h - y, 0), (x, 12 - w - x, 0))
        return jax.lax.pad(box, 0.0, config) + frame
    raise AssertionError(kind)


KINDS = ("add", "set", "mul", "slice", "dynamic_slice", "dynamic_update_slice")
KINDS += ("element", "pad")


class Placement(eqx.Module):
    box: jax.Array
    kind: str = eqx.field(static=True)
    y: int = eqx.field(static=True)
    x: int = eqx.field(static=True)


def program(frame: jax.Array, placements: list[Placement]) -> Any:
    def loss(frame, placements):
        out = frame
        for p in placements:
            out = _placed(p.kind, out, p.box, p.y, p.x)
        return jnp.sum(jnp.sin(out) * jnp.arange(out.size).reshape(out.shape))

    return jax.value_and_grad(loss, argnums=(0, 1))(frame, placements)


def _calls(draw: Any) -> list[list[Placement]]:
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3))
    shapes = [(draw(st.integers(1, 4)), draw(st.integers(1, 4))) for _ in kinds]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    calls = []
    for _ in range(draw(st.integers(2, 4))):  # fields: same shapes, other offsets
        placements = []
        for kind, (h, w) in zip(kinds, shapes, strict=True):
            y, x = (int(v) for v in rng.integers(0, 13 - np.array([h, w])))
            box = jnp.asarray(rng.normal(size=(h, w)), jnp.float32)
            placements.append(Placement(box, kind, y, x))
        calls.append(placements)
    return calls


def assert_close(a: Any, b: Any) -> None:
    """Equal structure, dtypes, weak types and shapes; values within a few units
    in the last place of float32 (what a reduction summed in another order
    changes)."""
    leaves_a, leaves_b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(leaves_a, leaves_b, strict=True):
        assert (x.dtype, x.weak_type, x.shape) == (y.dtype, y.weak_type, y.shape)
        scale = float(np.max(np.abs(np.asarray(x)))) or 1.0
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6 * scale)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_generated_programs_at_random_offsets(data):
    calls = data.draw(st.composite(_calls)())
    note(repr([[(p.kind, p.box.shape, p.y, p.x) for p in c] for c in calls]))
    frame = jnp.asarray(np.random.default_rng(7).normal(size=(12, 12)), jnp.float32)
    seen = {}
    jits = {"eqx": eqx.filter_jit, "af": af.filter_jit, "offsets": SHARING}
    for name, jit in jits.items():
        jax.clear_caches()  # what compiles depends only on this example's calls
        step = jit(program)
        with compiles_of("program") as compiled:
            seen[name] = [step(frame, placements) for placements in calls]
        seen[name + " compiles"] = len(compiled)
    for a, b, c in zip(seen["eqx"], seen["af"], seen["offsets"], strict=True):
        assert_bitwise(a, b)  # by default: exact
        assert_close(a, c)
    # Never more than eqx; three at most: its own, one generalised for the
    # offsets in which the second call differs, one for every offset.
    assert seen["af compiles"] == seen["eqx compiles"] <= len(calls)
    assert seen["offsets compiles"] <= 3


def test_every_kind_is_generalised():
    frame = jnp.ones((12, 12))
    for kind in KINDS:
        step = SHARING(program)
        jax.clear_caches()
        with compiles_of("program") as compiled:
            for y, x in [(1, 2), (3, 5), (6, 0), (2, 7)]:
                step(frame, [Placement(jnp.ones((3, 4)), kind, y, x)])
        assert len(compiled) == 2, kind


# -- what stays specialised ------------------------------------------------------------


def _count(fun: Callable[..., Any], calls: list[tuple]) -> tuple[int, int]:
    """XLA compiles of `fun` under eqx.filter_jit and sharing offsets over
    `calls`, results checked."""
    counts = []
    results = []
    for jit in (eqx.filter_jit, SHARING):
        jax.clear_caches()
        step = jit(fun)
        with compiles_of(fun.__name__) as compiled:
            results.append([step(*args) for args in calls])
        counts.append(len(compiled))
    for a, b in zip(*results, strict=True):
        assert_close(a, b)
    return counts[0], counts[1]


def test_an_integer_that_is_also_a_value_stays_specialised():
    def scaled_window(x, k):  # k starts the slice and scales it
        return x[k : k + 2] * k

    calls = [(jnp.arange(8.0), k) for k in (1, 2, 3)]
    assert _count(scaled_window, calls) == (3, 3)


def test_strided_slices_stay_specialised():
    def strided(x, k):
        return x[k : k + 4 : 2]

    calls = [(jnp.arange(8.0), k) for k in (0, 1, 2)]
    assert _count(strided, calls) == (3, 3)


def test_offsets_inside_a_loop_body_stay_specialised():
    def looped(x, k):
        return jax.lax.fori_loop(0, 2, lambda i, y: y.at[k : k + 2].add(1.0), x)

    calls = [(jnp.zeros(8), k) for k in (0, 1, 2)]
    assert _count(looped, calls) == (3, 3)


def test_offsets_inside_a_nested_jit_stay_specialised():
    def padded(x, k):  # jnp.pad traces to a jit of its own
        return jnp.pad(x, (k, 4 - k))

    calls = [(jnp.arange(4.0), k) for k in (0, 1, 2)]
    assert _count(padded, calls) == (3, 3)


def test_a_program_with_a_callback_stays_specialised():
    def printed(x, k):
        jax.debug.callback(lambda v: None, x)
        return x[k : k + 2]

    calls = [(jnp.arange(8.0), k) for k in (0, 1, 2)]
    assert _count(printed, calls) == (3, 3)


def test_offsets_that_agree_stay_literals():
    # Two offsets per call; the second is the same in every call, so the
    # generalised program takes the first alone.
    def window(x, k):
        return x[k : k + 2, 3:5]

    x = jnp.arange(64.0).reshape(8, 8)
    assert _count(window, [(x, k) for k in (0, 1, 2, 4)]) == (4, 2)
    closed = jax.make_jaxpr(lambda x: window(x, 1))(x)
    at = _offsets.sites(closed.jaxpr)
    assert _offsets.offsets(closed.jaxpr, at) == (1, 3)
    general = _offsets.generalised(closed, at, (True, False))
    assert len(general.jaxpr.invars) == len(closed.jaxpr.invars) + 1


def test_a_third_field_that_differs_where_the_first_two_agreed_compiles_again():
    def window(x, a, b):
        return x[a : a + 2, b : b + 2]

    x = jnp.arange(64.0).reshape(8, 8)
    calls = [(x, 0, 3), (x, 1, 3), (x, 2, 3), (x, 2, 5), (x, 4, 1), (x, 0, 0)]
    # Its own; a generalised one for the first offset; then one for both.
    assert _count(window, calls) == (6, 3)


# -- diagnostics -----------------------------------------------------------------------


def test_explain_retraces_says_offsets_differ_shared():
    jax.clear_caches()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            fit_fields(SHARING, 3, 1)
    texts = [str(w.message) for w in caught if isinstance(w.message, af.RetraceWarning)]
    assert len(texts) == 2, texts  # the second field compiled, the third did not
    assert all("offsets differ: shared" in t for t in texts)
    assert "this call compiled it" in texts[0]
    assert "this call compiled nothing" in texts[1]
    assert not any("ordinary array field" in t for t in texts)  # no rewrite advised


def test_audit_with_the_step_says_offsets_differ_shared():
    data = observed(0)
    findings = af.audit(build_scene(0), build_scene(1), fn=lambda s: loss(s, data))
    assert findings and all(f.kind == "value" for f in findings)
    assert all(f.hint.startswith("offsets differ: shared") for f in findings)
    assert "offsets differ: shared" in str(findings)


def test_audit_advises_as_before_where_the_integer_is_also_a_value():
    class Window(eqx.Module):
        x: jax.Array
        k: int = eqx.field(static=True)

    def scaled(w):  # k starts the slice and scales it: not offsets alone
        return w.x[w.k : w.k + 2] * w.k

    findings = af.audit(
        Window(jnp.arange(8.0), 1), Window(jnp.arange(8.0), 2), fn=scaled
    )
    assert findings
    assert not any("offsets differ" in f.hint for f in findings)


def test_explain_retraces_names_the_option_where_offsets_alone_differ():
    jax.clear_caches()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            fit_fields(af.filter_jit, 2, 1)
    (text,) = [
        str(w.message) for w in caught if isinstance(w.message, af.RetraceWarning)
    ]
    assert "share_offsets=True" in text and "ordinary array field" not in text


def test_explain_retraces_advises_as_before_where_the_integer_is_also_a_value():
    @af.filter_jit
    def scaled_window(x, k):
        return x[k : k + 2] * k

    jax.clear_caches()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            for k in (1, 2):
                scaled_window(jnp.arange(8.0), k)
    (text,) = [
        str(w.message) for w in caught if isinstance(w.message, af.RetraceWarning)
    ]
    assert "share_offsets" not in text and "integer offsets" not in text
    assert "fix:" in text


@pytest.mark.parametrize("donate", ["all", "all-except-first", "none"])
def test_donation_consumes_what_eqx_consumes(donate):
    def place(frame, box, y, x):
        return frame.at[y : y + 2, x : x + 2].add(box) * 2.0

    seen = {}
    jits = {"eqx": eqx.filter_jit, "af": SHARING}
    for name, jit in jits.items():
        jax.clear_caches()
        step = jit(place, donate=donate)
        calls = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # JAX: a donated buffer not usable
            with compiles_of("place") as compiled:
                for y, x in [(0, 1), (2, 3), (4, 0)]:
                    frame, box = jnp.ones((8, 8)), jnp.ones((2, 2))
                    out = np.asarray(step(frame, box, y, x))
                    calls.append((out.tolist(), frame.is_deleted(), box.is_deleted()))
        seen[name] = (calls, len(compiled))
    assert seen["af"][0] == seen["eqx"][0]
    assert (seen["eqx"][1], seen["af"][1]) == (3, 2)
