"""Compare the plain and swapped runs of a test suite, test by test.

Usage: python compare_outcomes.py RESULTS_DIR EXPECTED_FILE

RESULTS_DIR holds JUnit XML files named `plain-<file>.xml` and `swapped-<file>.xml`.
EXPECTED_FILE lists known differences, one per line: `<test id>  <reason>`.
Prints every difference; exits 1 if one is not listed (or a file did not run).
"""

import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path


def outcomes(path: Path) -> dict[str, str]:
    found = {}
    for case in ElementTree.parse(path).iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        test_id = f"{module}.py::{case.get('name')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                outcome = "skipped"
        found[test_id] = outcome
    return found


def expected_differences(path: Path) -> dict[str, str]:
    known = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            test_id, _, reason = line.partition("  ")
            known[test_id.strip()] = reason.strip()
    return known


def compare(results: Path, expected_file: Path) -> int:
    """Print the differences between the runs in RESULTS; 1 if one is unexplained.

    A swapped run without a plain one (`run_suite.py --modes swapped,plain-if-failed`
    skips the plain run of a file whose every test passed swapped) counts as
    compared only if no test failed: a failure there is unexplained.
    """
    known = expected_differences(expected_file) if expected_file.exists() else {}
    unexplained = 0
    compared = 0
    swapped_only = 0
    for swapped_file in sorted(results.glob("swapped-*.xml")):
        if not (results / swapped_file.name.replace("swapped-", "plain-", 1)).exists():
            swapped = outcomes(swapped_file)
            failed = sorted(t for t, outcome in swapped.items() if outcome == "failed")
            for test_id in failed:
                print(f"{test_id}: failed swapped, no plain run (UNEXPLAINED)")
            unexplained += len(failed)
            swapped_only += len(swapped)
    for plain_file in sorted(results.glob("plain-*.xml")):
        swapped_file = results / plain_file.name.replace("plain-", "swapped-", 1)
        if not swapped_file.exists():
            print(f"{swapped_file.name}: missing (the swapped run did not finish)")
            unexplained += 1
            continue
        plain, swapped = outcomes(plain_file), outcomes(swapped_file)
        for test_id in sorted(plain.keys() | swapped.keys()):
            compared += 1
            before, after = plain.get(test_id, "absent"), swapped.get(test_id, "absent")
            if before == after:
                continue
            reason = known.get(test_id)
            label = f"expected: {reason}" if reason else "UNEXPLAINED"
            print(f"{test_id}: {before} plain, {after} swapped ({label})")
            unexplained += reason is None
    if swapped_only:
        print(
            f"{swapped_only} tests run swapped only (their files passed every test "
            "swapped, so their plain runs were skipped)"
        )
    print(f"{compared} tests compared, {unexplained} unexplained differences")
    return 1 if unexplained or not (compared or swapped_only) else 0


if __name__ == "__main__":
    sys.exit(compare(Path(sys.argv[1]), Path(sys.argv[2])))
