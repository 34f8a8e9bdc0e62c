"""The trace counts `benchmarks/run.py --quick` relies on; no timing is asserted."""

import sys
from pathlib import Path

import pytest

from arrayfield import _jax_private
from helpers import script_module

RUN_PY = Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"


@pytest.fixture(scope="module")
def bench():
    with script_module(RUN_PY, "_arrayfield_bench_run") as module:
        yield module


def test_seed_loop_on_array_module_traces_once_in_100_steps(bench):
    run = bench.seed_loop("arraymodule", 100)
    assert run.traces == 1
    assert int(run.scene.x) == 100
    assert len(run.cumulative_s) == 100


def test_seed_loop_on_hand_wrapped_array_traces_once(bench):
    assert bench.seed_loop("array", 100).traces == 1


def test_seed_loop_on_python_int_traces_every_step(bench):
    assert bench.seed_loop("int", 10).traces == 10


def test_seed_loop_rows_report_exact_trace_counts(bench):
    rows, runs, traces_ok = bench.bench_seed_loop(quick=True)
    assert traces_ok
    assert rows[0].status == "pass"
    assert runs["arraymodule"].traces == 1
    # The timing row of a quick run is reported, never judged.
    assert rows[1].status == "not judged in quick mode"


def test_quick_mode_judges_no_timing_target_and_full_mode_does(bench):
    assert bench._status(False, quick=True) == "not judged in quick mode"
    assert bench._status(True, quick=True) == "not judged in quick mode"
    assert bench._status(False, quick=False) == "MISS"
    assert bench._status(True, quick=False) == "pass"


def test_dispatch_benchmark_traces_each_jit_once():
    path = RUN_PY.parent / "dispatch.py"
    with script_module(path, "_arrayfield_bench_dispatch") as dispatch:
        found = dispatch._case(
            lambda: (dispatch.SeedScene(x=0), 1),
            dispatch.seed_step,
            dispatch.JITS,
            number=20,
            rounds=3,
        )
    assert found["traces"] == {"af": 1, "eqx": 1, "jax": 1}
    assert set(found["us"]) == {"af", "eqx", "jax"}


@pytest.mark.skipif(
    _jax_private.sharing_problem() is not None,
    reason="callable sharing needs equinox >= 0.13 and jax.jit's parts readable",
)
def test_field_compiles_counts_one_compile_under_af_and_one_per_field_else():
    sys.path.insert(0, str(RUN_PY.parent))
    try:
        import field_compiles
    finally:
        sys.path.remove(str(RUN_PY.parent))
    measured = field_compiles.measure(fields=2, steps=2)
    compiles = {m["jit"]: m["compiles"] for m in measured}
    assert compiles == {"af.filter_jit": 1, "eqx.filter_jit": 2, "jax.jit": 2}
    assert {m["traces"] for m in measured} == {2}
    found = field_compiles.rows(measured, cache=[])
    assert found[0]["status"] == "pass"  # the counts, and equal results
