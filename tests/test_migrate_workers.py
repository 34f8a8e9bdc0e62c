"""`arrayfield migrate` shares a large tree out among forked copies of itself
(`_workers`, issue 21: speed). The cases that fork run in a fresh pytest
process (`tests/worker_cases.py`): this one has JAX's threads, and a process
with threads never forks, which the last test here checks.
"""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path

import pytest

from arrayfield.migrate._workers import Workers, threads
from helpers import python

CASES = Path(__file__).with_name("worker_cases.py")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="helpers are forked")
def test_the_forking_cases_pass_in_a_process_without_threads():
    tree = ast.parse(CASES.read_text())
    cases = [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    ]
    # Parametrized cases count once per parameter.
    expected = len(cases) + 2  # the report test runs three modes
    # jaxtyping's pytest plugin imports JAX, whose import starts a thread.
    plugins = ("-p", "no:cacheprovider", "-p", "no:jaxtyping")
    done = python("-m", "pytest", "-q", *plugins, CASES, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{expected} passed" in done.stdout, done.stdout


def _pid(kept: dict, key: str) -> int:
    return os.getpid()


def test_a_process_with_threads_runs_every_job_itself():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert threads() > 1
        keys = ["a", "b", "c"]
        with Workers(3) as workers:
            workers.place(keys, [1, 1, 1], start=0)
            assert set(workers.homes.values()) == {0, 1, 2}
            assert (
                workers.map(_pid, [(key,) for key in keys], keys) == [os.getpid()] * 3
            )
            assert workers._helpers == []
    finally:
        stop.set()
        thread.join()
