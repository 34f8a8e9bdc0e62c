"""examples/survey.py on a real Dask cluster: a worker killed mid-run loses no
field, the fits equal a one-process run bitwise, the fit step compiles once in
the whole cluster, and a rerun over the same results fits nothing.

The cluster (two worker processes, one thread each) is started here, and the
survey runs against it as a user runs it (`--scheduler ADDRESS`, a separate
process), so that this test can SIGKILL a worker while it fits a field.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from distributed import Client, LocalCluster

from helpers import ENV, python, script_module

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "survey.py"
FIELDS = 4
STEPS = 400  # about a second a field: long enough to kill a worker inside one
FITTED = ("flux", "position", "width", "background", "losses")


def survey_command(scheduler: str, tmp: Path) -> list[str]:
    return [
        str(EXAMPLE),
        *("--scheduler", scheduler, "--fields", str(FIELDS), "--steps", str(STEPS)),
        *("--cache-dir", str(tmp / "cache"), "--results", str(tmp / "results")),
        "--no-progress",
    ]


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def kill_a_worker_inside_a_field(
    client: Client, results: Path, survey: subprocess.Popen
) -> tuple[int, list[int]]:
    """Once the fields after the warm-up run, SIGKILL a worker that is fitting
    one of them; its pid and the fields it had not written when it died."""
    pids = client.run(os.getpid)  # worker address -> pid
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and survey.poll() is None:
        for address, keys in client.processing().items():
            fields = [int(str(k).split("-")[1]) for k in keys]
            # Field 0 is the warm-up: its file can exist before its task has
            # finished, so a kill then would find nothing lost. The others are
            # submitted only once it has finished.
            unwritten = [
                f for f in fields if not (results / f"field-{f:05d}.npz").exists()
            ]
            if address in pids and unwritten and 0 not in fields:
                os.kill(pids[address], signal.SIGKILL)
                lost = [
                    f for f in fields if not (results / f"field-{f:05d}.npz").exists()
                ]
                return pids[address], lost
        time.sleep(0.02)
    raise AssertionError("no worker was fitting a field after the warm-up")


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("survey")
    results = tmp / "results"
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        survey = subprocess.Popen(
            [sys.executable, *survey_command(cluster.scheduler_address, tmp)],
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            killed_pid, lost = kill_a_worker_inside_a_field(client, results, survey)
            stdout, stderr = survey.communicate(timeout=240)
        finally:
            survey.kill()
        assert survey.returncode == 0, stderr
        # The same folder again, on the same cluster: everything is there.
        rerun = python(*survey_command(cluster.scheduler_address, tmp), timeout=240)
    assert rerun.returncode == 0, rerun.stderr
    return {
        "tmp": tmp,
        "results": results,
        "summary": last_json(stdout),
        "rerun": last_json(rerun.stdout),
        "stdout": stdout,
        "killed_pid": killed_pid,
        "lost": lost,
    }


def test_a_worker_killed_inside_a_field_loses_no_field(killed_run):
    summary, results = killed_run["summary"], killed_run["results"]
    assert killed_run["lost"], "the worker was killed after its fields were written"
    assert summary["fields"] == summary["done"] == summary["fitted"] == FIELDS, (
        killed_run["stdout"]
    )
    assert sorted(p.name for p in results.glob("field-*.npz")) == [
        f"field-{f:05d}.npz" for f in range(FIELDS)
    ]
    with script_module(EXAMPLE, "_arrayfield_survey_example") as survey:
        for field in killed_run["lost"]:
            meta = survey.read_meta(results / f"field-{field:05d}.npz")
            assert meta["pid"] != killed_run["killed_pid"]  # fitted again elsewhere


def test_cluster_results_equal_a_one_process_run_bitwise(killed_run, tmp_path):
    with script_module(EXAMPLE, "_arrayfield_survey_example") as survey:
        for field in range(FIELDS):
            survey.fit_field(field, STEPS, str(tmp_path))
    for field in range(FIELDS):
        name = f"field-{field:05d}.npz"
        with (
            np.load(killed_run["results"] / name) as cluster,
            np.load(tmp_path / name) as alone,
        ):
            for key in FITTED:
                assert cluster[key].dtype == alone[key].dtype, (name, key)
                assert cluster[key].shape == alone[key].shape, (name, key)
                assert cluster[key].tobytes() == alone[key].tobytes(), (name, key)


def test_the_fit_step_compiles_once_in_the_whole_cluster(killed_run):
    # Two workers (and the one that replaced the killed worker): the warm-up
    # field's worker compiles the step, every other one reads it from the cache.
    assert killed_run["summary"]["step_compiles"] == 1, killed_run["stdout"]
    assert any((killed_run["tmp"] / "cache").iterdir())


def test_a_rerun_over_the_same_results_fits_nothing(killed_run):
    rerun = killed_run["rerun"]
    assert rerun["done"] == FIELDS
    assert rerun["fitted"] == 0
    assert rerun["step_compiles"] == 0


def test_an_embedded_cluster_compiles_the_step_once_and_reads_it_elsewhere(tmp_path):
    # Without the warm-up field, both workers would start a field at once, and
    # each would compile the step before the other had written it.
    result = python(
        EXAMPLE,
        *("--fields", "4", "--workers", "2", "--steps", "50", "--no-progress"),
        *("--cache-dir", str(tmp_path / "cache"), "--results", str(tmp_path / "r")),
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    assert last_json(result.stdout) == {
        **last_json(result.stdout),
        "fields": 4,
        "done": 4,
        "fitted": 4,
        "workers": 2,
        "step_compiles": 1,
    }
    with script_module(EXAMPLE, "_arrayfield_survey_example") as survey:
        metas = [survey.read_meta(p) for p in sorted((tmp_path / "r").iterdir())]
    assert [m["step_compiles"] for m in metas] == [1, 0, 0, 0]  # field 0 warms up
    compiling = {m["pid"] for m in metas if m["compiles"]}
    reading = {m["pid"] for m in metas if m["cache_loads"]}
    assert len(compiling) == 1 and len(compiling | reading) == 2, metas


def test_fields_on_threads_share_one_step_and_equal_a_one_process_run(tmp_path):
    # Dask's threaded workers: the threads call one af.filter_jit step, so it
    # compiles once with no cache, and each fit is what one thread alone gives.
    result = python(
        EXAMPLE,
        *("--fields", "4", "--threads", "2", "--steps", "50", "--no-progress"),
        *("--no-cache", "--results", str(tmp_path / "r")),
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    summary = last_json(result.stdout)
    assert (summary["fitted"], summary["workers"], summary["step_compiles"]) == (
        4,
        1,
        1,
    ), result.stdout
    (tmp_path / "alone").mkdir()
    with script_module(EXAMPLE, "_arrayfield_survey_example") as survey:
        for field in range(4):
            survey.fit_field(field, 50, str(tmp_path / "alone"))
    for field in range(4):
        name = f"field-{field:05d}.npz"
        with (
            np.load(tmp_path / "r" / name) as threaded,
            np.load(tmp_path / "alone" / name) as alone,
        ):
            for key in FITTED:
                assert threaded[key].tobytes() == alone[key].tobytes(), (name, key)


def test_the_survey_page_shows_the_measured_results_file():
    bench = EXAMPLE.parent.parent / "benchmarks" / "survey.py"
    with script_module(bench, "_arrayfield_bench_survey") as survey_bench:
        assert survey_bench.main(["--check"]) == 0, "rerun benchmarks/survey.py"
