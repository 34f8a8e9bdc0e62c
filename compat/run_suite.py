"""Run an equinox-based library's test suite plain and swapped; compare test by test.

Usage:

    python compat/run_suite.py LIBRARY [--subset] [--jit] [--timeout S]
                               [--results DIR] [--modes plain,swapped] [FILE...]

LIBRARY is one of equinox, equinox-next, diffrax, lineax, paramax: a folder of
`../shared/compat` beside the repository (or of $COMPAT_SUITES; or the folder
$<LIBRARY>_TESTS, e.g. $EQUINOX_TESTS) holding that project's test suite at a
released tag. Each file runs in its own pytest process,
once plain (`ARRAYFIELD_SWAP=0`) and once with `equinox.Module` swapped for
`arrayfield.ArrayModule`:

- equinox: only the test files' classes are swapped (plugin `swap_module`), since
  equinox's own classes exist before any plugin acts; `--jit` swaps
  `equinox.filter_jit` for `arrayfield.filter_jit` instead
  (`compat/swap_filter_jit.py`).
- diffrax, lineax, paramax: the library's own classes are swapped, before it is
  imported (plugin `swap_library`); `SWAP_CHECK` names one of its classes, and a run
  the swap did not reach exits 3, which this runner reports as a failure.

Every test whose outcome differs between the two runs is printed; a difference not
listed with its reason in `compat/expected_differences_<library>.txt` (or
`expected_differences_jit.txt`) makes the runner exit 1, as does a file that did not
finish within the time limit or whose pytest was killed by a signal. Files too
slow to run whole even plain run a `-k` subset, listed in SLOW_FILES below.
`--subset` runs the files CI runs: those where the swap first made a difference.

`--results DIR` keeps the JUnit XML and logs in DIR and skips a run whose XML is
already there, so a plain run can be reused while arrayfield changes; `--modes`
runs only some modes (comparison still uses all XML found in DIR). Where two
runs of every file cost too much, `--modes swapped,plain-if-failed` runs a file
plain only if a test failed swapped; the comparison then counts a swapped-only
file as passing only if every test in it passed.
$PYTHON (default .venv/bin/python) needs arrayfield, the library at the version of
its suite, and the suite's test dependencies (`pip install -e '.[compat]'`).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "compat"))

from compare_outcomes import compare, outcomes  # noqa: E402


@dataclass(frozen=True)
class Suite:
    folder: str
    tests: str
    plugin: str
    swap_check: str | None = None
    # CI's files: where the swap first made a difference, each with pytest arguments.
    subset: tuple[str, ...] = ()
    # Files that take longer than the time limit even plain: the `-k` subset that runs.
    slow: dict[str, str] = field(default_factory=dict)


# equinox's files where the swap once made a difference.
_EQUINOX_SUBSET = (
    "tests/test_jit.py",
    "tests/test_vmap.py",
    "tests/test_pmap.py",
    "tests/test_module.py",
    "tests/test_while_loop.py -k unperturbed",
)

SUITES = {
    "equinox": Suite(
        folder="equinox-v0.13.8",
        tests="tests",
        plugin="swap_module",
        subset=_EQUINOX_SUBSET,
    ),
    # equinox's unreleased main (see ../shared/compat/equinox-next/README.md): run
    # with $PYTHON's equinox being that wheel, as .ci/run's third environment is.
    "equinox-next": Suite(
        folder="equinox-next",
        tests="tests",
        plugin="swap_module",
        subset=_EQUINOX_SUBSET,
    ),
    "diffrax": Suite(
        folder="diffrax-0.7.2",
        tests="test",
        plugin="swap_library",
        swap_check="diffrax.Tsit5",
        # Every test diverged first (class creation crashed); then every solve,
        # through Solution.ts's structure name, and the Langevin solver's state.
        subset=(
            "test/test_term.py",
            "test/test_misc.py",
            "test/test_saveat_solution.py"
            " -k 'test_results or test_trivial_dense or test_t0_eq_t1'",
            "test/test_underdamped_langevin.py"
            " -k 'test_shape and float32 and (solver0 or solver1)'",
        ),
        slow={
            "test/test_adjoint.py": "not test_against and not test_sde_against",
            "test/test_brownian.py": "not test_statistics"
            " and not test_conditional_statistics",
            "test/test_underdamped_langevin.py": "not test_uld_strong_order",
            "test/test_integrate.py": "not test_basic and not test_ode_order"
            " and not test_sde_strong_order and not test_reverse_time",
            "test/test_detest.py": "test_a",
            "test/test_event.py": "terminate or scalar_error or dtype_error",
            "test/test_sde1.py": "test_sde_strong_limit",
            "test/test_sde2.py": "test_weakly_diagonal_noise"
            " or test_halfsolver_term_compatible",
        },
    ),
    "lineax": Suite(
        folder="lineax-0.1.1",
        tests="tests",
        plugin="swap_library",
        swap_check="lineax.MatrixLinearOperator",
        # lineax failed at import (AutoLinearSolver(well_posed=True)), so any file
        # shows it; test_well_posed (1570 tests, no difference) takes 6 min a run.
        subset=("tests/test_misc.py",),
        # Each of these runs a solver grid under nested transformations; on two
        # shared cores test_jvp took 7 minutes and test_jvp_jvp1 over 9, plain.
        slow={
            "tests/test_singular.py": "nonsquare_pytree_operator or breakdown",
            "tests/test_jvp.py": "make_matrix_operator",
            "tests/test_jvp_jvp1.py": "make_matrix_operator and construct_matrix",
            "tests/test_jvp_jvp2.py": "make_matrix_operator and construct_matrix",
            "tests/test_vmap_jvp.py": "make_matrix_operator",
            "tests/test_vmap_vmap.py": "make_matrix_operator",
        },
    ),
    "paramax": Suite(
        folder="paramax-0.0.3",
        tests="tests",
        plugin="swap_library",
        swap_check="paramax.Parameterize",
        # NonTrainable (a Generic base) lost its __init__ in test_wrappers.
        subset=("tests/test_wrappers.py", "tests/test_utils.py"),
    ),
}

# The filter_jit swap of equinox's suite: the files that call eqx.filter_jit most.
JIT_SUBSET = (
    "tests/test_jit.py",
    "tests/test_errors.py",
    "tests/test_ad.py",
    "tests/test_noinline.py",
    "tests/test_debug.py",
    "tests/test_callback.py",
)


def file_specs(suite: Suite, suite_dir: Path, args: argparse.Namespace) -> list[str]:
    if args.files:
        specs = args.files
    elif args.subset:
        specs = list(JIT_SUBSET if args.jit else suite.subset)
    else:
        specs = sorted(
            f"{suite.tests}/{path.name}"
            for path in (suite_dir / suite.tests).glob("test_*.py")
        )
    expanded = []
    for spec in specs:
        path, *extra = shlex.split(spec)
        if not extra and path in suite.slow:
            extra = ["-k", suite.slow[path]]
        expanded.append(shlex.join([path, *extra]))
    return expanded


def run_file(
    spec: str,
    mode: str,
    *,
    suite: Suite,
    suite_dir: Path,
    plugin: str,
    python: str,
    results: Path,
    timeout: float,
) -> str:
    path, *extra = shlex.split(spec)
    name = Path(path).stem
    xml = results / f"{mode}-{name}.xml"
    log = results / f"{mode}-{name}.log"
    if xml.exists():
        return f"kept from an earlier run ({xml.name})"
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["ARRAYFIELD_SWAP"] = "1" if mode == "swapped" else "0"
    paths = [str(suite_dir.parent), str(ROOT / "compat"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    if suite.swap_check and plugin == "swap_library":
        env["SWAP_CHECK"] = suite.swap_check
    command = [
        python,
        "-m",
        "pytest",
        "-p",
        plugin,
        "-p",
        "no:cacheprovider",
        "-q",
        "--no-header",
        "-rN",
        path,
        *extra,
        f"--junitxml={xml}",
    ]
    start = time.monotonic()
    with log.open("w") as out:
        # Its own process group, so a timeout ends pytest and whatever it started.
        process = subprocess.Popen(
            command,
            cwd=suite_dir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:  # also when the runner itself is stopped
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if code is None:
            xml.unlink(missing_ok=True)
            return f"TIMEOUT after {timeout:.0f} s"
        if code < 0:  # killed by a signal (a crash in XLA's compiler, say)
            xml.unlink(missing_ok=True)
            return f"CRASHED (signal {-code}) after {time.monotonic() - start:.0f} s"
    seconds = time.monotonic() - start
    lines = log.read_text(errors="replace").splitlines()
    notes = [line for line in lines if line.startswith("[swap_")]
    summary = lines[-1] if lines else "(no output)"
    if code == 3:
        summary += " -- SWAP_CHECK failed: the swap did not reach the library"
        xml.unlink(missing_ok=True)
    return "; ".join([*notes, f"{summary} [{seconds:.0f} s, exit {code}]"])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("library", choices=sorted(SUITES))
    parser.add_argument(
        "files",
        nargs="*",
        help="test files, each optionally with"
        " pytest arguments in one quoted word: 'test/x.py -k y'",
    )
    parser.add_argument("--subset", action="store_true", help="the files CI runs")
    parser.add_argument(
        "--jit",
        action="store_true",
        help="equinox only: swap equinox.filter_jit instead",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600,
        help="seconds per file and mode (default 600)",
    )
    parser.add_argument("--results", type=Path, help="keep XML and logs here")
    parser.add_argument(
        "--modes",
        default="plain,swapped",
        help="comma-separated: plain, swapped, plain-if-failed (after swapped)",
    )
    args = parser.parse_intermixed_args(argv)
    if args.jit and args.library != "equinox":
        parser.error("--jit swaps equinox.filter_jit in equinox's own suite only")
    return args


def _passed_every_test(results: Path, spec: str) -> bool:
    """Whether the swapped run of `spec` finished with no test failed."""
    xml = results / f"swapped-{Path(shlex.split(spec)[0]).stem}.xml"
    return xml.exists() and "failed" not in outcomes(xml).values()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # A stopped runner stops the pytest it started (see run_file's `finally`).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    suite = SUITES[args.library]
    base = Path(os.environ.get("COMPAT_SUITES", ROOT.parent / "shared" / "compat"))
    variable = f"{args.library.upper().replace('-', '_')}_TESTS"
    folder = os.environ.get(variable, base / suite.folder)
    suite_dir = Path(folder).resolve()
    if not (suite_dir / suite.tests).is_dir():
        print(
            f"{args.library}'s test suite not found at {suite_dir}"
            " (set COMPAT_SUITES): not run",
            file=sys.stderr,
        )
        return 0
    python = os.environ.get("PYTHON", str(ROOT / ".venv" / "bin" / "python"))
    if not os.path.isabs(python):
        python = str(ROOT / python)
    plugin = "swap_filter_jit" if args.jit else suite.plugin
    name = "jit" if args.jit else args.library
    expected = ROOT / "compat" / f"expected_differences_{name}.txt"

    with tempfile.TemporaryDirectory() as scratch:
        results = args.results or Path(scratch)
        results.mkdir(parents=True, exist_ok=True)
        specs = file_specs(suite, suite_dir, args)
        unfinished = 0  # files that timed out or crashed: not compared
        for requested in args.modes.split(","):
            mode = "plain" if requested == "plain-if-failed" else requested
            for spec in specs:
                if requested == "plain-if-failed" and _passed_every_test(results, spec):
                    continue
                print(f"== {args.library} {mode}: {spec}", flush=True)
                outcome = run_file(
                    spec,
                    mode,
                    suite=suite,
                    suite_dir=suite_dir,
                    plugin=plugin,
                    python=python,
                    results=results,
                    timeout=args.timeout,
                )
                unfinished += outcome.startswith(("TIMEOUT", "CRASHED"))
                print(f"   {outcome}", flush=True)
        code = compare(results, expected)
    return 1 if code or unfinished else 0


if __name__ == "__main__":
    sys.exit(main())
