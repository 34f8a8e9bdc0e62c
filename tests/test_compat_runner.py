"""compat/run_suite.py and compare_outcomes.py: how two runs are compared.

The suites themselves are data outside the repository (CI runs them); these tests
check the comparison on hand-written JUnit XML, and the file list of a suite.
"""

import sys
from pathlib import Path

import pytest

COMPAT = Path(__file__).resolve().parent.parent / "compat"
sys.path.insert(0, str(COMPAT))

import compare_outcomes  # noqa: E402
import run_suite  # noqa: E402


def _junit(path: Path, cases: dict[str, str]) -> None:
    rows = []
    for test_id, outcome in cases.items():
        module, _, name = test_id.partition(".py::")
        inner = {"passed": "", "failed": "<failure/>", "skipped": "<skipped/>"}
        rows.append(
            f'<testcase classname="{module.replace("/", ".")}" name="{name}">'
            f"{inner[outcome]}</testcase>"
        )
    path.write_text(f"<testsuites><testsuite>{''.join(rows)}</testsuite></testsuites>")


def test_outcomes_read_back_as_test_ids(tmp_path):
    _junit(tmp_path / "x.xml", {"test/test_a.py::test_one[x]": "failed"})
    assert compare_outcomes.outcomes(tmp_path / "x.xml") == {
        "test/test_a.py::test_one[x]": "failed"
    }


@pytest.mark.parametrize(
    ("listed", "code"), [("", 1), ("test/test_a.py::test_two  why it differs", 0)]
)
def test_a_difference_fails_unless_listed(tmp_path, capsys, listed, code):
    _junit(tmp_path / "plain-test_a.xml", {"test/test_a.py::test_two": "passed"})
    _junit(tmp_path / "swapped-test_a.xml", {"test/test_a.py::test_two": "failed"})
    expected = tmp_path / "expected.txt"
    expected.write_text(f"# header\n{listed}\n")
    assert compare_outcomes.compare(tmp_path, expected) == code
    out = capsys.readouterr().out
    assert "test_two: passed plain, failed swapped" in out
    assert ("why it differs" in out) == bool(listed)


def test_a_missing_swapped_run_fails(tmp_path, capsys):
    _junit(tmp_path / "plain-test_a.xml", {"test/test_a.py::test_two": "passed"})
    assert compare_outcomes.compare(tmp_path, tmp_path / "none.txt") == 1
    assert "swapped-test_a.xml: missing" in capsys.readouterr().out


def test_slow_files_run_their_subset(tmp_path):
    suite = run_suite.SUITES["diffrax"]
    (tmp_path / "test").mkdir()
    for name in ("test_integrate.py", "test_misc.py"):
        (tmp_path / "test" / name).write_text("")
    args = run_suite.parse_args(["diffrax"])
    specs = run_suite.file_specs(suite, tmp_path, args)
    keyword = suite.slow["test/test_integrate.py"]
    assert specs == [
        f"test/test_integrate.py -k '{keyword}'",
        "test/test_misc.py",
    ]


def test_every_library_has_its_list_of_expected_differences():
    for name in [*run_suite.SUITES, "jit"]:
        path = COMPAT / f"expected_differences_{name}.txt"
        assert path.read_text().startswith("#"), path


@pytest.mark.parametrize(("outcome", "code"), [("passed", 0), ("failed", 1)])
def test_a_swapped_only_file_passes_only_if_every_test_passed(
    tmp_path, capsys, outcome, code
):
    # run_suite.py --modes swapped,plain-if-failed skips plain after a clean file.
    _junit(tmp_path / "swapped-test_b.xml", {"test/test_b.py::test_one": outcome})
    assert compare_outcomes.compare(tmp_path, tmp_path / "none.txt") == code
    out = capsys.readouterr().out
    assert ("failed swapped, no plain run" in out) == (outcome == "failed")


def test_files_may_follow_options():
    args = run_suite.parse_args(["lineax", "--modes", "swapped", "tests/test_misc.py"])
    assert args.files == ["tests/test_misc.py"] and args.modes == "swapped"


def test_a_crashed_run_is_reported_and_leaves_no_results(tmp_path):
    # A pytest killed by a signal (a crash in XLA's compiler, seen on lineax's
    # test_vmap_jvp in both modes) writes no XML: the runner must not count the
    # file as passing.
    suite_dir = tmp_path / "crashing"
    (suite_dir / "tests").mkdir(parents=True)
    (suite_dir / "tests" / "test_x.py").write_text(
        "import os, signal\n\n\ndef test_dies():\n"
        "    os.kill(os.getpid(), signal.SIGSEGV)\n"
    )
    suite = run_suite.Suite(folder="crashing", tests="tests", plugin="no:doctest")
    results = tmp_path / "results"
    results.mkdir()
    outcome = run_suite.run_file(
        "tests/test_x.py",
        "swapped",
        suite=suite,
        suite_dir=suite_dir,
        plugin="no:doctest",
        python=sys.executable,
        results=results,
        timeout=120,
    )
    assert outcome.startswith("CRASHED (signal 11)"), outcome
    assert not (results / "swapped-test_x.xml").exists()
