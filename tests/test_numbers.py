"""Programs that differ only in the numbers they embed share one generalised
executable, with `af.filter_jit(share_numbers=True)`: two compiles per family.

`tests/boxed_fields` is modelled on the client's rendering: sources in boxes
added into a frame at per-field Python-int origins (slice starts, index
literals) with their centres taken relative to the box (float literals), one
clipped box every fourth field, fitted with an optax step. Every jit traces
once per field; eqx.filter_jit compiles once per field, and so does
af.filter_jit by default; with `share_numbers=True` it compiles twice per shape
set: the first field of each family compiles its own program (bitwise
eqx.filter_jit's), the second a program that takes the numbers that differ as
inputs, which runs every later field of the family. Later fields' results need
not be bitwise eqx.filter_jit's (XLA folds constants it is given, not inputs):
they are compared within `RTOL` of the largest value, per leaf, on the fixture
and on generated programs of every kind of number lifted; the default stays
exact.
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
from arrayfield import _blocks, _jax_private, _layouts, _numbers
from boxed_fields import BOX, build_scene, fit_fields, loss, observed
from helpers import assert_bitwise, compiles_of, run_code

pytestmark = pytest.mark.skipif(
    _jax_private.sharing_problem() is not None,
    reason="sharing compiles needs a JAX whose traced jits show their program",
)

K = 8
STEPS = 3
# The bound docs/many_fields.md states: float32 rounding, a few units in the
# last place of the leaf's largest value (a fusion that rounds or sums in
# another order).
RTOL = 1e-5


def fits(jit: Callable[..., Any], box: int = BOX, fields: int = K):
    jax.clear_caches()  # also af.filter_jit's executables: each run starts cold
    return fit_fields(jit, fields, STEPS, box)


SHARING = functools.partial(af.filter_jit, share_numbers=True)


def assert_close(a: Any, b: Any) -> None:
    """Equal structure, dtypes, weak types and shapes; values within `RTOL` of
    each leaf's largest value."""
    leaves_a, leaves_b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(leaves_a, leaves_b, strict=True):
        if not isinstance(x, jax.Array):
            assert type(x) is type(y) and x == y
            continue
        assert (x.dtype, x.weak_type, x.shape) == (y.dtype, y.weak_type, y.shape)
        scale = float(np.max(np.abs(np.asarray(x, np.float64)), initial=0.0)) or 1.0
        np.testing.assert_allclose(x, y, rtol=0, atol=RTOL * scale)


def test_eight_fields_compile_twice_per_shape_set():
    eqx_runs, eqx_traces, eqx_compiles = fits(eqx.filter_jit)
    af_runs, af_traces, af_compiles = fits(SHARING)
    assert (eqx_traces, eqx_compiles) == (K, K)
    # Fields with every box whole (0-2, 4-6), and those with a clipped box (3,
    # 7): two families, each its first field's own program and one shared.
    assert (af_traces, af_compiles) == (K, 4)
    for a, b in zip(eqx_runs, af_runs, strict=True):
        np.testing.assert_allclose(a.losses, b.losses, rtol=RTOL)
        assert_close(a.scene, b.scene)
    for first in (0, 3):  # a family's first field: its own program, exact
        assert eqx_runs[first].losses == af_runs[first].losses
        assert_bitwise(eqx_runs[first].scene, af_runs[first].scene)


@pytest.mark.parametrize(
    "options",
    [{}, {"share_compiles": False}, {"share_compiles": False, "share_numbers": True}],
)
def test_by_default_every_field_compiles_its_own(options):
    runs, traces, compiles = fits(functools.partial(af.filter_jit, **options))
    assert (traces, compiles) == (K, K)
    eqx_runs, _, _ = fits(eqx.filter_jit)
    for a, b in zip(eqx_runs, runs, strict=True):  # exact, as eqx.filter_jit
        assert a.losses == b.losses
        assert_bitwise(a.scene, b.scene)


def test_boxes_of_another_shape_are_another_family():
    def both_shapes(jit):
        fitted = [fit_fields(jit, 3, STEPS, box) for box in (BOX, BOX - 4)]
        return [run for runs, _, _ in fitted for run in runs], [
            compiles for _, _, compiles in fitted
        ]

    jax.clear_caches()
    af_runs, af_compiles = both_shapes(SHARING)
    jax.clear_caches()
    eqx_runs, _ = both_shapes(eqx.filter_jit)
    assert af_compiles == [2, 2]  # per shape: its first field's, and the shared one
    for a, b in zip(eqx_runs, af_runs, strict=True):
        assert_close(a.scene, b.scene)


def test_share_offsets_is_the_former_name():
    decorator = af.filter_jit(share_offsets=True)  # it warns where it decorates
    with pytest.warns(DeprecationWarning, match="share_numbers=True"):
        decorator(lambda x: x)
    with pytest.warns(DeprecationWarning, match="share_numbers=True"):
        _, traces, compiles = fits(
            functools.partial(af.filter_jit, share_offsets=True), fields=4
        )
    assert (traces, compiles) == (4, 3)  # fields 0 and 1, and 3 (clipped)


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


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_generated_programs_at_random_offsets(data):
    calls = data.draw(st.composite(_calls)())
    note(repr([[(p.kind, p.box.shape, p.y, p.x) for p in c] for c in calls]))
    frame = jnp.asarray(np.random.default_rng(7).normal(size=(12, 12)), jnp.float32)
    seen = {}
    jits = {"eqx": eqx.filter_jit, "af": af.filter_jit, "numbers": SHARING}
    for name, jit in jits.items():
        jax.clear_caches()  # what compiles depends only on this example's calls
        step = jit(program)
        with compiles_of("program") as compiled:
            seen[name] = [step(frame, placements) for placements in calls]
        seen[name + " compiles"] = len(compiled)
    for a, b, c in zip(seen["eqx"], seen["af"], seen["numbers"], strict=True):
        assert_bitwise(a, b)  # by default: exact
        assert_close(a, c)
    assert seen["af compiles"] == seen["eqx compiles"] <= len(calls)
    # The family's first program is its own (exact); the second compile lifts
    # the numbers that differ from it, and a third widens that where a later
    # field differs in one the second kept.
    assert_bitwise(seen["eqx"][0], seen["numbers"][0])
    assert seen["numbers compiles"] <= seen["eqx compiles"]
    assert seen["numbers compiles"] == 1 or seen["eqx compiles"] > 1


def test_every_placement_is_generalised():
    frame = jnp.ones((12, 12))
    for kind in KINDS:
        step = SHARING(program)
        jax.clear_caches()
        with compiles_of("program") as compiled:
            for y, x in [(1, 2), (3, 5), (6, 0), (2, 7)]:
                step(frame, [Placement(jnp.ones((3, 4)), kind, y, x)])
        assert len(compiled) == 2, kind  # the first field's own, and the shared


# -- what stays in the program ---------------------------------------------------------


def _count(fun: Callable[..., Any], calls: list[tuple]) -> tuple[int, int]:
    """XLA compiles of `fun` under eqx.filter_jit and sharing numbers over
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


def test_an_integer_that_is_also_a_value_is_shared_too():
    def scaled_window(x, k):  # k starts the slice and scales it
        return x[k : k + 2] * k

    calls = [(jnp.arange(8.0), k) for k in (1, 2, 3)]
    assert _count(scaled_window, calls) == (3, 2)


def test_a_family_compiles_twice_wherever_its_numbers_differ():
    def window(x, a, b):
        return x[a : a + 2, b : b + 2]

    x = jnp.arange(64.0).reshape(8, 8)
    # One slice: its two starts are lifted together, though only `a` differs
    # at the second call.
    calls = [(x, 0, 3), (x, 1, 3), (x, 2, 3), (x, 2, 5), (x, 4, 1), (x, 0, 0)]
    assert _count(window, calls) == (6, 2)


def test_a_number_that_differs_later_widens_the_family_program():
    def scaled_window(x, a, k):
        return x[a : a + 2] * k

    x = jnp.arange(8.0)
    calls = [
        (x, 0, 1.5),  # the family's first: its own program
        (x, 1, 1.5),  # `a` differs: the shared program takes it, keeps 1.5
        (x, 3, 1.5),  # joins
        (x, 3, 2.5),  # `k` differs too: the program widens to take it
        (x, 5, 0.5),  # joins the wider one
    ]
    assert _count(scaled_window, calls) == (5, 3)
    # What the second compile kept a literal is a literal of its program.
    step = SHARING(scaled_window)
    jax.clear_caches()
    for args in calls[:2]:
        step(*args)
    np.testing.assert_array_equal(step(x, 4, 1.5), x[4:6] * 1.5)


# XLA merges a slice of a slice into one read of the outer array without
# clamping the inner start: with the start lifted, the merged read went past
# the inner slice (v[8] for `jnp.take(v[2:5], 9, mode="clip")`, not v[4]).
NESTED_READS = {
    "take with clip from a slice": lambda v, i: jnp.take(v[2:5], i, mode="clip"),
    "dynamic index into a slice": lambda v, i: jax.lax.dynamic_index_in_dim(v[2:5], i),
    "dynamic slice of a slice": lambda v, i: jax.lax.dynamic_slice_in_dim(v[1:5], i, 2),
    "dynamic slice of a dynamic slice": lambda v, i: jax.lax.dynamic_slice_in_dim(
        jax.lax.dynamic_slice_in_dim(v, 0, 4), i + 2, 2
    ),
    "2-D": lambda v, i: jax.lax.dynamic_slice(
        v.reshape(7, 1)[1:6] * v[:5], (i, i), (2, 2)
    ),
}


@pytest.mark.parametrize("read", list(NESTED_READS.values()), ids=list(NESTED_READS))
def test_a_start_past_an_inner_slice_is_clamped_as_eqx_clamps(read):
    def nested(v, i):
        return read(v, i)

    v = jnp.arange(10, 17)  # integers: exact, so equal means bitwise
    starts = (0, 9, 1, 5, -3)
    own = eqx.filter_jit(nested)
    shared = SHARING(nested)
    for i in starts:
        want, got = own(v, i), shared(v, i)
        assert want.dtype == got.dtype and want.tolist() == got.tolist(), i
    jax.clear_caches()
    with compiles_of("nested") as compiled:
        for i in starts:
            shared(v, i)
    assert len(compiled) == 2  # the first start's own, one for every other


def _nested_read(v: jax.Array, reads: tuple[tuple[str, int, int], ...]) -> Any:
    """Reads of `v` through slices, each at a start that may lie past them."""
    outs = []
    for kind, a, i in reads:
        inner = v[a : a + 3]
        if kind == "take":
            outs.append(jnp.take(inner, i, mode="clip")[None])
        elif kind == "index":
            outs.append(jax.lax.dynamic_index_in_dim(inner, i))
        elif kind == "slice":
            outs.append(jax.lax.dynamic_slice_in_dim(inner, i, 2))
        else:  # a dynamic slice of a dynamic slice
            outer = jax.lax.dynamic_slice_in_dim(v, a, 4)
            outs.append(jax.lax.dynamic_slice_in_dim(outer, i, 2))
    return jnp.concatenate(outs)


@pytest.mark.filterwarnings("ignore::arrayfield.RetraceWarning")
@settings(max_examples=25, deadline=None)
@given(st.data())
def test_generated_nested_reads_equal_eqx_exactly(data):
    kinds = data.draw(
        st.lists(st.sampled_from(["take", "index", "slice", "nested"]), min_size=1)
    )
    v = jnp.arange(100, 112)  # integers: exact
    shared, own = SHARING(_nested_read), eqx.filter_jit(_nested_read)
    for _ in range(3):  # fields: the same reads at other starts
        reads = tuple(
            (kind, data.draw(st.integers(0, 8)), data.draw(st.integers(-4, 12)))
            for kind in kinds
        )
        assert shared(v, reads).tolist() == own(v, reads).tolist(), reads


def test_a_captured_array_that_is_also_the_donated_argument_stays_a_constant():
    # Lifted, the captured array would be passed a second time beside the
    # donated argument that is the same buffer: an error where eqx runs.
    def make(c, y):
        def closes_over(v):
            return v * c + y

        return closes_over

    for c in (1.0, 2.0, 3.0):
        mine, theirs = jnp.arange(3.0), jnp.arange(3.0)
        want = eqx.filter_jit(make(c, theirs), donate="all")(theirs)
        got = af.filter_jit(make(c, mine), share_numbers=True, donate="all")(mine)
        assert got.tolist() == want.tolist()


def test_a_captured_array_committed_to_a_device_stays_a_constant():
    data = jax.device_put(jnp.arange(4.0), jax.devices()[0])  # committed

    def make(c):
        def shifted(x):
            return x * c + data

        return shifted

    x = jnp.ones(4)
    seen = []
    with compiles_of("shifted") as compiled:
        for c in (1.0, 2.0):
            got = af.filter_jit(make(c), share_numbers=True)(x)
            assert got.tolist() == eqx.filter_jit(make(c))(x).tolist()
            seen.append(got.devices())
    assert seen == [{jax.devices()[0]}] * 2
    assert len(compiled) == 4  # each field its own program, as under eqx


_ON_TWO_DEVICES = """
import jax, jax.numpy as jnp, equinox as eqx, arrayfield as af
from jax.sharding import Mesh, NamedSharding, PartitionSpec

first, second = jax.devices()
halves = NamedSharding(Mesh(jax.devices(), ("i",)), PartitionSpec("i"))


def outcome(call):
    try:
        out = call()
    except Exception as error:
        return type(error).__name__, str(error).splitlines()[0]
    return out.tolist(), str(out.sharding)


for data, x in [
    (jax.device_put(jnp.arange(4.0), second), jax.device_put(jnp.ones(4), first)),
    (jax.device_put(jnp.arange(4.0), second), jnp.ones(4)),
    (jax.device_put(jnp.arange(4.0), halves), jnp.ones(4)),
    (jax.device_put(jnp.arange(4.0), halves), jax.device_put(jnp.ones(4), second)),
]:
    for c in (1.0, 2.0, 3.0):
        def shifted(x, c=c):
            return x * c + data

        want = outcome(lambda: eqx.filter_jit(shifted)(x))
        got = outcome(lambda: af.filter_jit(shifted, share_numbers=True)(x))
        assert got == want, (c, got, want)
print("same")
"""


def test_captured_arrays_on_another_device_or_sharded_run_where_eqx_runs():
    # Lifted, such an array would move the shared program to its devices:
    # output on another device, sharded, or "incompatible devices".
    result = run_code(
        _ON_TWO_DEVICES,
        env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2"},
    )
    assert result.stdout == "same\n", result.stderr[-2000:]


def test_a_shared_field_called_with_another_signature_traces_as_eqx():
    # A field that runs its family's shared program skips computing each
    # call's signature; arrays of another shape or dtype still trace again,
    # exactly where eqx.filter_jit traces, and a return to the first
    # signature runs the shared program again.
    eight, ten = jnp.arange(8.0), jnp.arange(10.0)
    calls = [(eight, 1), (eight, 2), (eight, 2), (ten, 2), (eight, 2)]
    calls += [(eight.astype(jnp.int32), 2), (eight, 2), (ten, 3)]

    def traced(jit, traces):
        @jit
        def window(x, origin):
            traces.append((x.shape, str(x.dtype), origin))
            return x[origin : origin + 2] * 2.5 + origin

        return window

    seen = {}
    for name, jit in (("eqx", eqx.filter_jit), ("af", SHARING)):
        traces = []
        window = traced(jit, traces)
        seen[name] = ([window(x, origin) for x, origin in calls], traces)
    assert seen["af"][1] == seen["eqx"][1]
    for got, want in zip(seen["af"][0], seen["eqx"][0], strict=True):
        assert_close(got, want)


def test_constants_are_lifted(jaxpr_constants):
    def offset(x, origin):  # a constant array, not a literal
        return x - jnp.array(origin, jnp.float32)

    x = jnp.ones(2)
    # Whether the array is a constant of the program or written into the `sub`
    # is JAX's choice (0.10 inlines it under simplified constants, 0.12.1
    # keeps it a constant under both settings): the lift must not depend on it.
    assert _count(offset, [(x, o) for o in [(1, 2), (3, 4), (5, 6)]]) == (3, 2)


def test_fresh_steps_closing_over_each_fields_data_share_one_program(jaxpr_constants):
    def fit(jit, data):
        @jit
        def step(x):  # `data` is a constant of the program
            return jnp.sum((x - data) ** 2)

        return step(jnp.zeros(3))

    fields = [jnp.arange(3.0) + i for i in range(4)]
    seen = {}
    for name, jit in {"eqx": eqx.filter_jit, "numbers": SHARING}.items():
        jax.clear_caches()
        with compiles_of("step") as compiled:
            seen[name] = [fit(jit, data) for data in fields]
        seen[name + " compiles"] = len(compiled)
    assert (seen["eqx compiles"], seen["numbers compiles"]) == (4, 2)
    for a, b in zip(seen["eqx"], seen["numbers"], strict=True):
        assert_close(a, b)


class _Special(eqx.Module):
    c: float = eqx.field(static=True)


def _reciprocal_of_sum(x, m):  # `x + 0.0` folds to `x`: 1/-0.0 is -inf
    return 1.0 / (x + m.c)


def _scaled_log(x, m):  # a subnormal folds to itself, flushes to zero at run time
    return x * jnp.log(jnp.float32(m.c))


@pytest.mark.parametrize(
    ("fun", "x", "values"),
    [
        (_reciprocal_of_sum, [-0.0, 1.0], [1.0, 2.0, 0.0, -0.0]),
        (_scaled_log, [1.0, 2.0], [1.0, 2.0, 1e-40]),
        (_reciprocal_of_sum, [1.0, 2.0], [1.0, 2.0, float("inf"), float("nan")]),
    ],
    ids=["zeros", "subnormal", "inf-nan"],
)
def test_special_float_values_stay_literals(fun, x, values):
    x = jnp.asarray(x, jnp.float32)
    fields = [_Special(c) for c in values]
    seen = {}
    for name, jit in {"eqx": eqx.filter_jit, "numbers": SHARING}.items():
        jax.clear_caches()
        step = jit(fun)
        with compiles_of(fun.__name__) as compiled:
            seen[name] = [step(x, f) for f in fields]
        seen[name + " compiles"] = len(compiled)
    for a, b in zip(seen["eqx"], seen["numbers"], strict=True):
        assert_bitwise(a, b)
    # The family's own and generalised programs, then each special value its
    # own: as many as eqx.filter_jit (0.0 and -0.0 are one key to both).
    assert seen["numbers compiles"] == seen["eqx compiles"]


def test_captured_arrays_of_zeros_or_subnormals_stay_constants(jaxpr_constants):
    def fit(jit, data):
        @jit
        def step(x):  # `data` is a constant of the program
            return 1.0 / (x + data), jnp.log(data + 0.0 * x)

        return step(jnp.full(2, -0.0))

    fields = [jnp.full(2, v, jnp.float32) for v in (1.0, 2.0, 0.0, 3.0)]
    fields.append(jnp.asarray([1.0, 1e-40], jnp.float32))
    for data in fields:
        jax.clear_caches()
        # Each in a process of both: the later ones share with the first two.
        outs = {}
        for name, jit in {"eqx": eqx.filter_jit, "numbers": SHARING}.items():
            outs[name] = [fit(jit, d) for d in (fields[0], fields[1], data)]
        assert_bitwise(outs["eqx"][2], outs["numbers"][2])


def test_a_branch_index_stays():
    def switched(x, k):
        return jax.lax.switch(k, [jnp.sin, jnp.cos, jnp.tanh], x)

    calls = [(jnp.arange(4.0), k) for k in (0, 1, 2)]
    assert _count(switched, calls) == (3, 3)


def test_a_loop_count_stays():
    def looped(x, n):
        return jax.lax.fori_loop(0, n, lambda i, y: y * 1.5, x)

    def waited(x, n):
        return jax.lax.while_loop(
            lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2), (0, x)
        )

    for fun in (looped, waited):
        calls = [(jnp.arange(4.0), n) for n in (1, 2, 3)]
        assert _count(fun, calls) == (3, 3), fun.__name__


def test_strided_slices_stay():
    def strided(x, k):
        return x[k : k + 4 : 2]

    calls = [(jnp.arange(8.0), k) for k in (0, 1, 2)]
    assert _count(strided, calls) == (3, 3)


def test_numbers_inside_a_loop_body_stay():
    def looped(x, k):
        return jax.lax.fori_loop(0, 2, lambda i, y: y.at[k : k + 2].add(1.0), x)

    calls = [(jnp.zeros(8), k) for k in (0, 1, 2)]
    assert _count(looped, calls) == (3, 3)


def test_a_pad_inside_a_nested_jit_is_lifted_too():
    def padded(x, k):  # jnp.pad pads in a jit of its own: a growing pad
        return jnp.pad(x, (k, 4 - k))

    calls = [(jnp.arange(4.0), k) for k in (0, 1, 2)]
    assert _count(padded, calls) == (3, 2)


def test_a_pad_of_another_size_is_another_family():
    def padded(x, k):
        return jnp.pad(x, (k, k))

    calls = [(jnp.arange(4.0), k) for k in (0, 1, 2)]
    assert _count(padded, calls) == (3, 3)


def test_numbers_inside_a_nested_jit_are_lifted():
    def helper(c):
        @jax.jit
        def shifted(x):  # c is a literal of this jit's own jaxpr
            return jnp.sin(x - c) * 0.5

        return shifted

    def stepped(x, c):
        return helper(c)(x) + 1.0

    calls = [(jnp.arange(4.0), c) for c in (1.0, 2.0, 3.0)]
    assert _count(stepped, calls) == (3, 2)


def test_a_program_with_a_callback_stays():
    def printed(x, k):
        jax.debug.callback(lambda v: None, x)
        return x[k : k + 2]

    calls = [(jnp.arange(8.0), k) for k in (0, 1, 2)]
    assert _count(printed, calls) == (3, 3)


def test_what_is_lifted_is_read_in_order():
    def window(x, k):
        return x[k : k + 2, 3:5] * 2.5

    x = jnp.arange(64.0).reshape(8, 8)
    closed = jax.make_jaxpr(lambda x: window(x, 1))(x)
    at = _numbers.sites(closed.jaxpr)
    found = _numbers.numbers(closed.jaxpr, at)
    assert [n.value for n in found] == [1, 3, 2.5]
    assert [n.dtype for n in found] == [np.int32, np.int32, np.float32]
    general = _numbers.generalised(closed, at)
    assert len(general.jaxpr.invars) == len(closed.jaxpr.invars) + 3
    assert [v.tolist() for v in _numbers.packed(found)] == [[1, 3], [2.5]]


# -- diagnostics -----------------------------------------------------------------------


def test_explain_retraces_says_numbers_differ_shared_and_which_family():
    jax.clear_caches()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            fit_fields(SHARING, 5, 1)
    told = [
        w for w in caught if issubclass(w.category, af.RetraceNote | af.RetraceWarning)
    ]
    texts = [str(w.message) for w in told]
    # Field 1 compiles field 0's family's program over the numbers that differ,
    # field 2 joins it; field 3's clipped box starts another family; field 4
    # joins the first again.
    assert len(texts) == 4, texts
    # Only the new family asks for attention: compiling a family's shared
    # program, or joining it, is a note, which
    # `-W error::arrayfield.RetraceWarning` lets through.
    assert [w.category for w in told] == [
        af.RetraceNote,
        af.RetraceNote,
        af.RetraceWarning,
        af.RetraceNote,
    ]
    assert "from the first of family 1 only in the numbers it embeds" in texts[0]
    assert "(A family: the programs of a function that differ only" in texts[0]
    assert "numbers differ: shared. share_numbers=True compiled" in texts[0]
    assert "numbers differ: shared. It joined family 1," in texts[1]
    assert "compiled nothing" in texts[1]
    assert "traced and compiled again" in texts[2]
    assert "sources[3].shape" in texts[2]
    assert "Its program starts family 2" in texts[2]
    assert "as its own program (results bitwise eqx.filter_jit's)" in texts[2]
    assert "It joined family 1," in texts[3]
    # No rewrite advised where only numbers differ.
    assert not any("ordinary array field" in texts[i] for i in (0, 1, 3))


class _Edge(eqx.Module):
    x: int = eqx.field(static=True)


def _clipped_render(frame, s):
    w = min(4, frame.shape[0] - s.x)  # a box clipped at the frame's edge
    return frame.at[s.x : s.x + w].add(1.0).sum()


def test_a_new_family_says_where_its_computation_differs():
    # No static field names the clipped box's size (it is computed): the
    # warning names the line where the program stops matching its family's.
    step = SHARING(_clipped_render)
    jax.clear_caches()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            for x in (1, 2, 3, 8):
                step(jnp.zeros(10), _Edge(x))
    told = [w for w in caught if issubclass(w.category, af.RetraceWarning)]
    (text,) = [str(w.message) for w in told]
    assert "Its program starts family 2" in text
    assert "What keeps it out of the families before" in text
    line = _clipped_render.__code__.co_firstlineno + 2
    assert f"test_numbers.py:{line}" in text
    notes = [str(w.message) for w in caught if w.category is af.RetraceNote]
    assert len(notes) == 2 and not any("fix:" in n for n in notes)


def test_retraces_that_share_pass_the_docs_error_filter():
    # docs/diagnostics.md's `-W error::arrayfield.RetraceWarning`, on fields
    # whose boxes all have one size: every retrace shares, nothing to fix.
    jax.clear_caches()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("error", af.RetraceWarning)
        with af.explain_retraces():
            _, traces, compiles = fit_fields(SHARING, 3, 1)
    assert (traces, compiles) == (3, 2)
    notes = [w for w in caught if w.category is af.RetraceNote]
    assert len(notes) == 2  # field 1 compiled the family's program, field 2 ran it


def test_audit_with_the_step_says_numbers_differ_shared():
    data = observed(0)
    findings = af.audit(build_scene(0), build_scene(1), fn=lambda s: loss(s, data))
    assert findings and all(f.kind == "value" for f in findings)
    assert all(f.hint.startswith("numbers differ: shared") for f in findings)
    assert "numbers differ: shared" in str(findings)
    # With the step, the count for af.filter_jit is read, not a lower bound.
    heading = str(findings).splitlines()[0]
    assert "for af.filter_jit (read off the programs the step traces to)" in heading
    assert "certainly" not in heading


def test_audit_keeps_its_advice_for_a_number_that_is_no_static_field():
    class Window(eqx.Module):
        x: jax.Array
        scale: float  # a leaf: an array would save the trace too

    def scaled(w):
        return w.x * w.scale

    findings = af.audit(
        Window(jnp.arange(8.0), 1.5), Window(jnp.arange(8.0), 2.5), fn=scaled
    )
    (finding,) = findings
    assert not finding.hint.startswith("numbers differ")
    assert "Float[Array" in finding.hint and "share_numbers=True" in finding.hint


def test_explain_retraces_names_the_option_where_static_numbers_alone_differ():
    jax.clear_caches()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            fit_fields(af.filter_jit, 2, 1)
    (text,) = [
        str(w.message) for w in caught if isinstance(w.message, af.RetraceWarning)
    ]
    assert "share_numbers=True" in text and "ordinary array field" not in text


def _retrace_text(step: Callable[..., Any]) -> str:
    """The one RetraceWarning of `step` called with k = 1, then 2."""
    jax.clear_caches()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            for k in (1, 2):
                step(jnp.arange(8.0), k)
    (text,) = [
        str(w.message) for w in caught if isinstance(w.message, af.RetraceWarning)
    ]
    return text


def test_a_number_argument_used_as_a_slice_start_is_not_advised_an_array():
    # `x[k : k + 2]` needs a Python int: traced with k as an array it raises,
    # so explain_retraces keeps it a number and names the option instead.
    text = _retrace_text(af.filter_jit(lambda x, k: x[k : k + 2] * k))
    assert "share_numbers=True) would compile one program" in text
    assert "jnp.asarray" not in text and "pass an array" not in text


def test_a_number_argument_that_arithmetic_reads_keeps_its_array_advice():
    text = _retrace_text(af.filter_jit(lambda x, k: x[1:3] * k))
    assert "pass an array, jnp.asarray(x, dtype=...)" in text  # saves the trace
    assert "share_numbers=True) would compile one program" in text


# -- every kind of number lifted, on random values ------------------------------------


def _op(kind: str, x: jax.Array, c: float, k: int) -> jax.Array:
    """One operation that embeds the Python numbers `c` (float) and `k` (int)."""
    if kind == "sub":
        return x - c
    if kind == "mul":
        return x * c
    if kind == "div":
        return x / c
    if kind == "pow":  # a float exponent: `pow`, not `integer_pow`
        return (jnp.abs(x) + 1.0) ** (abs(c) % 2.0)
    if kind == "max":
        return jnp.maximum(x, c)
    if kind == "where":  # a comparison, and a literal chosen where it holds
        return jnp.where(x > c, x, c)
    if kind == "clip":  # literals given to a nested jit
        return jnp.clip(x, c, c + 1.0)
    if kind == "exp":
        return jnp.exp(jnp.tanh(x) * c)
    if kind == "int":  # integer literals in integer arithmetic
        i = jnp.floor(x * 4.0).astype(jnp.int32)
        return x + ((i + k) % 7 - k // 2).astype(x.dtype)
    if kind == "index":  # an integer literal index, read and written
        j = k % x.shape[0]
        return x.at[j].add(x[j] * c)
    raise AssertionError(kind)


OPS = ("sub", "mul", "div", "pow", "max", "where", "clip", "exp", "int", "index")


class Numbers(eqx.Module):
    kinds: tuple[str, ...] = eqx.field(static=True)
    cs: tuple[float, ...] = eqx.field(static=True)
    ks: tuple[int, ...] = eqx.field(static=True)


def numbers_program(x: jax.Array, numbers: Numbers) -> Any:
    def loss(x):
        for kind, c, k in zip(numbers.kinds, numbers.cs, numbers.ks, strict=True):
            x = _op(kind, x, c, k)
        return jnp.sum(jnp.sin(x) * jnp.arange(x.size)), x

    return jax.value_and_grad(loss, has_aux=True)(x)


def _fields(draw: Any) -> list[Numbers]:
    kinds = tuple(draw(st.lists(st.sampled_from(OPS), min_size=1, max_size=4)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    fields = []
    for _ in range(draw(st.integers(2, 4))):  # same operations, other numbers
        cs = tuple(float(v) for v in rng.uniform(0.25, 3.0, len(kinds)))
        ks = tuple(int(v) for v in rng.integers(0, 50, len(kinds)))
        fields.append(Numbers(kinds, cs, ks))
    return fields


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_generated_programs_with_random_numbers(data):
    fields = data.draw(st.composite(_fields)())
    note(repr([(f.kinds, f.cs, f.ks) for f in fields]))
    x = jnp.asarray(np.random.default_rng(3).normal(size=6), jnp.float32)
    seen = {}
    for name, jit in {"eqx": eqx.filter_jit, "numbers": SHARING}.items():
        jax.clear_caches()
        step = jit(numbers_program)
        with compiles_of("numbers_program") as compiled:
            seen[name] = [step(x, f) for f in fields]
        seen[name + " compiles"] = len(compiled)
    for a, b in zip(seen["eqx"], seen["numbers"], strict=True):
        assert_close(a, b)
    # One family: its first field's own program (exact), then the shared one,
    # widened where a later field differs in a number the second shared.
    assert_bitwise(seen["eqx"][0], seen["numbers"][0])
    assert seen["numbers compiles"] <= seen["eqx compiles"]
    assert seen["numbers compiles"] == 1 or seen["eqx compiles"] > 1


@pytest.mark.parametrize("kind", OPS)
def test_each_kind_is_lifted(kind):
    fields = [Numbers((kind,), (c,), (k,)) for c, k in [(0.5, 3), (1.7, 11), (2.9, 40)]]
    x = jnp.linspace(-2.0, 2.0, 6)
    assert _count(numbers_program, [(x, f) for f in fields]) == (3, 2)


# docs/many_fields.md's bound for half precision: units in the last place of the
# leaf's largest value (measured: up to about 3 for float16).
HALF_ULPS = 8


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=str)
def test_half_precision_stays_within_its_bound(dtype):
    rng = np.random.default_rng(46)
    eps = float(jnp.finfo(dtype).eps)
    for _ in range(12):
        kinds = tuple(str(k) for k in rng.choice(OPS, int(rng.integers(1, 5))))
        x = jnp.asarray(rng.normal(size=6), dtype)
        fields = [
            Numbers(
                kinds,
                tuple(float(v) for v in rng.uniform(0.25, 3.0, len(kinds))),
                tuple(int(v) for v in rng.integers(0, 50, len(kinds))),
            )
            for _ in range(3)
        ]
        jax.clear_caches()
        own, shared = eqx.filter_jit(numbers_program), SHARING(numbers_program)
        for i, f in enumerate(fields):
            a, b = own(x, f), shared(x, f)
            if i == 0:  # the family's first: its own program
                assert_bitwise(a, b)
            for p, q in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
                assert (p.dtype, p.weak_type) == (q.dtype, q.weak_type)
                p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
                assert np.array_equal(np.isnan(p), np.isnan(q)), kinds
                finite = np.isfinite(p)
                scale = float(np.max(np.abs(p[finite]), initial=0.0)) or 1.0
                worst = float(np.max(np.abs(p - q)[finite], initial=0.0))
                assert worst <= HALF_ULPS * eps * scale, (kinds, worst / eps / scale)


def _integer_program(x: jax.Array, numbers: Numbers) -> jax.Array:
    for c, k in zip(numbers.cs, numbers.ks, strict=True):
        m = int(c * 7) + 1  # a positive integer literal
        x = (x * m + k) // m - (x % m) + jnp.clip(x, -k, k)
        x = x.at[k % 4 : k % 4 + 2].add(jnp.int32(k))
    return x


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.uint8, jnp.int8], ids=str)
def test_integers_are_exact(dtype):
    rng = np.random.default_rng(7)
    x = jnp.asarray(rng.integers(0, 100, 6), dtype)
    fields = [
        Numbers(("int",) * 2, tuple(rng.uniform(0.25, 3.0, 2)), (k, 100 - k))
        for k in (3, 41, 97, 0)
    ]
    own, shared = eqx.filter_jit(_integer_program), SHARING(_integer_program)
    jax.clear_caches()
    with compiles_of("_integer_program") as compiled:
        for f in fields:
            assert_bitwise(own(x, f), shared(x, f))  # wraparound included
    assert len(compiled) == 4 + 2  # eqx's four, and the family's two


def test_a_number_keeps_its_weak_type():
    def scaled(s, c):  # s weakly typed, c a Python float: the product is weak
        return s * c, s + c

    s = jnp.asarray(2.0)
    assert s.weak_type
    assert _count(scaled, [(s, c) for c in (0.5, 1.5, 3.0)]) == (3, 2)


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


# -- a JAX that writes its programs otherwise ------------------------------------------


def test_the_probe_finds_numbers_shared_on_this_jax():
    # JAX 0.11 stores `inline` as an enum and inlines `True` late: read as
    # before, every program looked unshareable and nothing was shared, silently.
    assert _layouts.numbers_unshared() is None


def test_a_jax_whose_programs_cannot_share_says_so_once(monkeypatch):
    # What a JAX that traces plain jits with new options would look like.
    monkeypatch.setattr(_jax_private, "plain_jit_options", lambda params: False)
    _layouts.can_share_numbers.cache_clear()
    try:
        with pytest.warns(af.CompatibilityWarning) as caught:
            first = af.filter_jit(share_numbers=True)(lambda x: x + 1)
            second = af.filter_jit(share_numbers=True)(lambda x: x * 2)
        assert len(caught) == 1
        message = str(caught[0].message)
        assert f"jax {jax.__version__}" in message and "share_numbers" in message
        assert caught[0].filename == __file__  # the user's line, not ours
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert float(first(jnp.float32(1))) == 2.0
            assert float(second(jnp.float32(1))) == 2.0
        _, traces, compiles = fits(SHARING, fields=4)
        assert (traces, compiles) == (4, 4)  # each field's own program, as equinox
    finally:
        _layouts.can_share_numbers.cache_clear()


# -- blocks moved by a scatter or gather -----------------------------------------------


def _starts(y: int, x: int) -> jax.Array:
    # As `jnp` builds a block's start vector from Python ints.
    return jnp.concatenate([jnp.full((1,), y, jnp.int32), jnp.full((1,), x, jnp.int32)])


def _moved(kind: str, frame: jax.Array, box: jax.Array, y: int, x: int) -> Any:
    """`frame` with `box` added or set at `(y, x)`, or the block there read, by
    a scatter or gather in the mode `jnp` gives them (a block that does not fit
    is dropped, or read as zeros)."""
    drop = jax.lax.GatherScatterMode.FILL_OR_DROP
    if kind == "gather":
        numbers = jax.lax.GatherDimensionNumbers(
            offset_dims=(0, 1), collapsed_slice_dims=(), start_index_map=(0, 1)
        )
        return jax.lax.gather(
            frame, _starts(y, x), numbers, box.shape, mode=drop, fill_value=0
        ) * jnp.sum(box)
    numbers = jax.lax.ScatterDimensionNumbers(
        update_window_dims=(0, 1),
        inserted_window_dims=(),
        scatter_dims_to_operand_dims=(0, 1),
    )
    scatter = jax.lax.scatter_add if kind == "add" else jax.lax.scatter
    return scatter(frame, _starts(y, x), box, numbers, mode=drop)


@pytest.mark.parametrize("kind", ["add", "set", "gather"])
def test_a_block_is_moved_by_dynamic_slices_only_where_it_fits(kind):
    def place(frame, box, y, x):
        return _moved(kind, frame, box, y, x)

    frame = jnp.asarray(np.random.default_rng(3).normal(size=(8, 8)), jnp.float32)
    box = jnp.arange(1.0, 7.0).reshape(2, 3)
    # Inside, inside, a block past the edge (dropped, or read as zeros), inside.
    starts = [(1, 2), (5, 4), (7, 6), (0, 5)]
    results, counts = [], []
    for jit in (eqx.filter_jit, SHARING):
        jax.clear_caches()
        step = jit(place)
        with compiles_of("place") as compiled:
            results.append([step(frame, box, y, x) for y, x in starts])
        counts.append(len(compiled))
    for a, b in zip(*results, strict=True):
        assert_close(a, b)
    # The inside blocks: one family (its first program, then the shared one);
    # the block past the edge is a family of its own, whose first program it is.
    assert counts == [4, 3]
    # In the shared program the inside block is a dynamic slice or update:
    # no bounds check computed on every call.
    closed = jax.make_jaxpr(place, static_argnums=(2, 3))(frame, box, 1, 2)
    assert _blocks.windows(closed.jaxpr) != []
    at = _numbers.sites(closed.jaxpr)
    names = {e.primitive.name for e in _numbers.generalised(closed, at).jaxpr.eqns}
    assert not names & {"scatter", "scatter-add", "gather"}
    assert names & {"dynamic_slice", "dynamic_update_slice"}
    outside = jax.make_jaxpr(place, static_argnums=(2, 3))(frame, box, 7, 6)
    assert [inside for _, inside in _blocks.windows(outside.jaxpr)] == [False]
    at = _numbers.sites(outside.jaxpr)
    names = {e.primitive.name for e in _numbers.generalised(outside, at).jaxpr.eqns}
    assert names & {"scatter", "scatter-add", "gather"}
