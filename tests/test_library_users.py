"""Users on top of someone else's library (issue 52): `tests/library_users`
holds `skylib`, a package built on equinox (classes re-exported with `*` and
one at run time, fields its constructor turns into arrays itself, a setter
through `eqx.tree_at`), and `fit_sources.py`, a tutorial-style script that
uses it. `skylib` is placed among installed packages (a user site-packages
directory) and the script runs in a project of its own, as a user meets them.

Checked by following the advice as printed: migrate on the package, then the
first fix that the unasked warning, `explain_retraces` and `af.audit` print,
applied in the user's script only; the package is never edited.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from arrayfield import _jax_private
from helpers import python
from migrate_helpers import codes, migrate

FIXTURE = Path(__file__).with_name("library_users")
PACKAGE = "skylib"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """(the user's project, what the environment needs to find skylib
    installed, on top of `helpers.ENV`)."""
    base = tmp_path_factory.mktemp("userbase")
    env = {"PYTHONUSERBASE": str(base)}
    where = "import site; print(site.getusersitepackages())"
    site = python("-c", where, env=env, check=True).stdout.strip()
    shutil.copytree(FIXTURE / PACKAGE, Path(site) / PACKAGE)
    # A virtual environment leaves the user's site-packages off sys.path.
    env["PYTHONPATH"] = site
    project = tmp_path_factory.mktemp("project")
    shutil.copy(FIXTURE / "fit_sources.py", project)
    return project, env


def _fit(installed, *args: str, explain: bool = False) -> dict:
    project, env = installed
    if explain:
        env = {**env, "ARRAYFIELD_EXPLAIN_RETRACES": "1"}
    done = python("fit_sources.py", *args, cwd=project, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def _first_fix(text: str) -> str:
    return text.split("fix: ", 1)[1]


def test_migrate_follows_re_exports_and_says_what_it_cannot_tell(tmp_path):
    shutil.copytree(FIXTURE / PACKAGE, tmp_path / PACKAGE)
    result = migrate(tmp_path, "--check", PACKAGE)
    assert codes(result) == [
        # Profile is bound by globals().update in skylib/__init__.py.
        "skylib/extras.py:4 AF009 Profile",
        # Source reached through `from .models import *`: Halo is a Module.
        "skylib/halo.py:7 AF001 Halo.radius",
        "skylib/profiles.py:7 AF001 Profile.width",
    ]  # nothing on Source.flux or .centre (converted in its __init__), nor an
    # AF002 on Source.kernel (the array broadcast_to takes first, not a shape)
    assert "re-exported dynamically at skylib/__init__.py:9" in result.stdout


@pytest.mark.parametrize("jit", ["af", "eqx"])
def test_following_the_first_fix_printed_compiles_once(installed, jit):
    # eqx.filter_jit is explained by explain_retraces (the environment switch);
    # af.filter_jit warns unasked.
    before = _fit(installed, jit, explain=jit == "eqx")
    assert before["compiles"] == 13  # the constructor's array, then 12 numbers
    advice = [_first_fix(before["warnings"][0]), *before["audit"]]
    for fix in advice:
        # The user's side first: the package is not theirs to edit.
        assert fix.startswith(
            "Source.flux is declared in the installed package skylib, so from "
            "your own code: where its value changes between calls, give it an "
            "array, jnp.asarray(x, dtype=...), wherever you set it (the "
            "package's setter"
        ), fix
    # Applied as printed, in the script alone: an array given to the setter.
    after = _fit(installed, jit, "fixed", explain=jit == "eqx")
    assert after["compiles"] == 1
    assert after["warnings"] == [] and after["audit"] == []
    _, env = installed
    site = Path(env["PYTHONPATH"]) / PACKAGE
    for path in (FIXTURE / PACKAGE).glob("*.py"):
        assert (site / path.name).read_bytes() == path.read_bytes()  # untouched


@pytest.mark.skipif(
    _jax_private.sharing_problem() is not None,
    reason="sharing numbers needs a JAX whose traced jits show their program",
)
def test_under_share_numbers_the_warning_states_what_compiles(installed):
    got = _fit(installed, "af-numbers")
    (warning,) = got["warnings"]
    assert "a family compiles twice, however many values it meets" in warning
    # The constructor's array flux compiles its own program; the numbers given
    # through the setter after it are one family: twice, for 12 values.
    assert got["compiles"] == 1 + 2
