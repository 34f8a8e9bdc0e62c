"""`arrayfield migrate` on a whole package: tests/migrate_project/skyfit.

The package has every pattern the project-wide analysis is for: a base class in
one module and subclasses in others (reached through a relative import, a
`from . import base` and a re-export from `__init__.py`), `Base = eqx.Module`,
a `type(...)` class made per call, fitted float fields, a shape list from a
helper, per-instance names, a lambda, a partial and an opaque object, fitted
with optax. The CLI runs as a real subprocess on a copy; the fit runs in a
fresh interpreter and reports how many times its jitted step was traced.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_cli, run_code

PROJECT = Path(__file__).parent / "migrate_project"
N_SCENES = 3

sys.path.insert(0, str(PROJECT))
from report_edits import EDITS  # noqa: E402

pytestmark = pytest.mark.skipif(os.sep != "/", reason="expected output uses /")


def migrate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("migrate", *args, cwd=cwd, timeout=120)


def traces_of_fit(cwd: Path) -> subprocess.CompletedProcess[str]:
    """Fit N_SCENES scenes; stdout is how many times the jitted step traced."""
    return run_code(f"import skyfit.fit; print(skyfit.fit.main({N_SCENES}))", cwd=cwd)


def apply_report_edits(package: Path) -> None:
    for name, before, after in EDITS:
        path = package / name
        text = path.read_text()
        assert text.count(before) == 1, (name, before)
        path.write_text(text.replace(before, after))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copytree(PROJECT / "skyfit", tmp_path / "skyfit")
    return tmp_path


def test_check_reports_every_hazard_in_every_module(project):
    result = migrate("--check", "skyfit", cwd=project)

    assert result.returncode == 1, result.stderr
    assert result.stdout == (PROJECT / "expected_check.txt").read_text()
    assert result.stderr == (
        "3 of 9 files would be migrated, 10 diagnostics, 1 of them edited by --fix.\n"
    )


def test_plain_migration_breaks_the_shape_field_the_report_names(project):
    assert migrate("-q", "skyfit", cwd=project).returncode == 0
    result = traces_of_fit(project)
    assert result.returncode != 0
    assert "Source._fft_shape" in (PROJECT / "expected_check.txt").read_text()


def test_fix_then_report_edits_take_the_fit_from_one_compile_per_scene_to_one(
    project,
):
    before = traces_of_fit(project)
    assert before.returncode == 0, before.stderr
    assert before.stdout == f"{N_SCENES}\n"

    fixed = migrate("--fix", "skyfit", cwd=project)
    assert fixed.returncode == 0, fixed.stderr
    expected = [
        line
        for line in (PROJECT / "expected_check.txt").read_text().splitlines()
        if not line.startswith("would migrate") and " AF002 " not in line
    ]
    diagnostics = [line for line in fixed.stdout.splitlines() if " AF" in line]
    assert diagnostics == expected
    source = (project / "skyfit" / "source.py").read_text()
    assert "    _fft_shape: jnp.array = af.field(convert=False)\n" in source
    assert "import arrayfield as af\nimport jax.numpy as jnp\n" in source

    # --fix output imports and runs; the floats still recompile per scene.
    after_fix = traces_of_fit(project)
    assert after_fix.returncode == 0, after_fix.stderr
    assert after_fix.stdout == f"{N_SCENES}\n"

    apply_report_edits(project / "skyfit")
    clean = migrate("--check", "skyfit", cwd=project)
    assert (clean.returncode, clean.stdout) == (0, "")
    after_edits = traces_of_fit(project)
    assert after_edits.returncode == 0, after_edits.stderr
    assert after_edits.stdout == "1\n"
