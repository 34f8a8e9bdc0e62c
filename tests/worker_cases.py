"""Cases for `arrayfield migrate`'s forked helpers (`_workers`), run by
`tests/test_migrate_workers.py` in a fresh pytest process: a helper is only
forked from a process with one thread, and the suite's own process has JAX's.
Each process parses its share of the files, sends back the facts, and later
analyses the files whose parses it kept. What the command reports and writes
must not depend on how many processes there are, and a helper that fails or
dies costs time, never a result.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from arrayfield.__main__ import main
from arrayfield.migrate import _runner
from arrayfield.migrate._workers import Workers, threads

ROOT = Path(__file__).parents[1]
TESTS = ROOT / "tests"
sys.path.insert(0, str(ROOT / "benchmarks"))
from migrate_tree import build_tree  # noqa: E402

PARENT = os.getpid()


@pytest.fixture(autouse=True)
def _single_threaded():
    # Otherwise nothing forks, and each case would test one process only.
    assert hasattr(os, "fork")
    assert threads() == 1, "run these cases in a process without threads"


def _pid(kept: dict, key: str) -> tuple[str, int]:
    return key, os.getpid()


def _remember(kept: dict, key: str, value: int) -> None:
    kept[key] = value


def _recall(kept: dict, key: str) -> int | None:
    return kept.get(key)


def _fails_in_helpers(kept: dict, key: str) -> tuple[str, int]:
    if os.getpid() != PARENT:
        raise RuntimeError("only in a helper")
    return key, os.getpid()


def _fails(kept: dict, key: str) -> None:
    raise KeyError(key)


def _spread(workers: Workers, keys: list[str]) -> None:
    workers.place(keys, [1] * len(keys), start=0)
    assert set(workers.homes.values()) == set(range(workers.size))


def test_each_job_runs_in_the_home_of_its_key_and_results_keep_their_order():
    keys = [f"file{n}" for n in range(9)]
    with Workers(3) as workers:
        _spread(workers, keys)
        results = workers.map(_pid, [(key,) for key in keys], keys)
        assert [key for key, _ in results] == keys
        pids = {workers.homes[key]: pid for key, pid in results}
        assert pids[0] == PARENT
        assert len(set(pids.values())) == 3


def test_what_a_process_keeps_stays_with_it_for_later_jobs():
    keys = ["a", "b", "c", "d"]
    with Workers(2) as workers:
        _spread(workers, keys)
        workers.map(_remember, [(key, n) for n, key in enumerate(keys)], keys)
        assert workers.map(_recall, [(key,) for key in keys], keys) == [0, 1, 2, 3]
        # Only this process's share is in this process.
        here = {key for key in keys if workers.homes[key] == 0}
        assert set(workers.kept) == here


def test_below_the_threshold_nothing_is_forked():
    with Workers(4) as workers:
        workers.place(["a", "b"], [10, 20], start=31)
        assert set(workers.homes.values()) == {0}
        assert workers.map(_pid, [("a",), ("b",)], ["a", "b"]) == [
            ("a", PARENT),
            ("b", PARENT),
        ]
        assert workers._helpers is None
        # Work placed later counts what came before: 31 units in all now.
        workers.place(["c"], [1], start=31)
        assert workers.homes["c"] != 0


def test_a_helper_whose_job_raises_hands_its_jobs_back():
    keys = ["a", "b", "c", "d"]
    with Workers(2) as workers:
        _spread(workers, keys)
        results = workers.map(_fails_in_helpers, [(key,) for key in keys], keys)
    assert results == [(key, PARENT) for key in keys]


def test_an_error_in_a_job_is_raised_here_as_without_helpers():
    keys = ["a", "b"]
    with Workers(2) as workers:
        workers.place(keys, [1, 1], start=0)
        with pytest.raises(KeyError, match="a"):
            workers.map(_fails, [(key,) for key in keys], keys)


def test_a_killed_helper_costs_time_not_results():
    keys = ["a", "b", "c", "d"]
    with Workers(2) as workers:
        _spread(workers, keys)
        workers.map(_pid, [(key,) for key in keys], keys)
        (helper,) = workers._helpers or []
        os.kill(helper.pid, signal.SIGKILL)
        results = workers.map(_pid, [(key,) for key in keys], keys)
        assert results == [(key, PARENT) for key in keys]


def test_helpers_are_reaped_at_close():
    keys = ["a", "b", "c"]
    with Workers(3) as workers:
        _spread(workers, keys)
        workers.map(_pid, [(key,) for key in keys], keys)
        pids = [helper.pid for helper in workers._helpers or []]
    assert len(pids) == 2
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def _inputs(tmp_path: Path) -> list[Path]:
    build_tree(tmp_path / "benchmark", 60)
    shutil.copytree(TESTS / "migrate_project", tmp_path / "project")
    return [tmp_path / "benchmark", tmp_path / "project"]


def _report(args: list[str], capfd) -> str:
    status = main(["migrate", *args, "."])
    out, err = capfd.readouterr()
    return f"exit {status}\n--- stdout\n{out}--- stderr\n{err}"


@pytest.mark.parametrize(
    "mode", [["--check"], ["--check", "--typed"], ["--diff"]], ids=" ".join
)
def test_the_report_does_not_depend_on_the_number_of_processes(
    tmp_path, monkeypatch, capfd, mode
):
    monkeypatch.setattr(_runner, "PARALLEL_BYTES", 0)
    for directory in _inputs(tmp_path):
        monkeypatch.chdir(directory)
        alone = _report(["-j", "1", *mode], capfd)
        assert "AF0" in alone
        for jobs in ("2", "3"):
            assert _report(["-j", jobs, *mode], capfd) == alone, (directory, jobs)


def test_fix_writes_the_same_files_with_helpers(tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(_runner, "PARALLEL_BYTES", 0)
    written = {}
    for jobs in ("1", "2"):
        root = tmp_path / f"j{jobs}"
        for directory in _inputs(root):
            monkeypatch.chdir(directory)
            _report(["-j", jobs, "--fix"], capfd)
        written[jobs] = {
            path.relative_to(root): path.read_bytes() for path in root.rglob("*.py")
        }
    assert written["1"] == written["2"]
    original = {
        path.relative_to(tmp_path / "j1" / "project"): path.read_bytes()
        for path in (tmp_path / "j1" / "project").rglob("*.py")
    }
    assert original != {
        path.relative_to(TESTS / "migrate_project"): path.read_bytes()
        for path in (TESTS / "migrate_project").rglob("*.py")
    }


def test_the_benchmark_tree_is_shared_out(tmp_path):
    """At the size the benchmark measures, both processes take files."""
    build_tree(tmp_path, 300)
    files, _ = _runner.find_files([str(tmp_path)], [])
    contents, _ = _runner.read_files(files)
    with Workers(2) as workers:
        index, errors = _runner.index_project(contents, workers)
        alone, _ = _runner.index_project(contents)
        assert not errors
        assert set(workers.homes.values()) == {0, 1}
        assert index.files == alone.files
        work = _runner.files_to_rewrite(contents, index)
        shared = _runner.rewrite_files(
            work, contents, index, fix=False, typed=False, text=False, workers=workers
        )
    assert shared == _runner.rewrite_files(
        work, contents, alone, fix=False, typed=False, text=False
    )
    assert not workers.kept  # phase 2 took the parses it was given


def _fails_here(kept: dict, key: str, batch: str) -> tuple[str, str]:
    if os.getpid() == PARENT and batch == "first":
        raise ValueError(key)
    return key, batch


def test_a_batch_that_raised_leaves_no_reply_for_the_next():
    keys = ["a", "b"]
    with Workers(2) as workers:
        _spread(workers, keys)
        with pytest.raises(ValueError):
            workers.map(_fails_here, [(key, "first") for key in keys], keys)
        results = workers.map(_fails_here, [(key, "second") for key in keys], keys)
    assert results == [("a", "second"), ("b", "second")]


def _timed_out(signum: int, frame: object) -> None:
    raise TimeoutError("a helper waits for an end of input that never comes")


def test_two_open_worker_sets_close_in_either_order():
    previous = signal.signal(signal.SIGALRM, _timed_out)
    signal.alarm(30)
    try:
        for order in ((0, 1), (1, 0)):
            sets = [Workers(2), Workers(2)]
            for workers in sets:
                _spread(workers, ["a", "b"])
                workers.map(_pid, [("a",), ("b",)], ["a", "b"])
            for index in order:
                sets[index].close()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
