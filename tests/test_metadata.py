"""The built wheel's metadata, which a package index shows: complete, and true.

Builds the wheel as a user does (`pip wheel --no-deps`) and reads its METADATA.
"""

from __future__ import annotations

import email
import email.message
import importlib.util
import re
import zipfile
from pathlib import Path

import pytest

from helpers import python

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = (ROOT / "pyproject.toml").read_text()

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("trove_classifiers") is None,
    reason="trove-classifiers is in the `test` extra: pip install -e '.[test]'",
)


@pytest.fixture(scope="module")
def metadata(tmp_path_factory: pytest.TempPathFactory) -> email.message.Message:
    out = tmp_path_factory.mktemp("wheel")
    built = python(
        *("-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"),
        *("-w", out, ROOT),
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = out.glob("arrayfield-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(archive.read(name))


def test_wheel_names_its_authors_licence_and_keywords(metadata):
    assert metadata["Author"] == "arrayfield developers"
    assert metadata["Maintainer"] == "arrayfield developers"
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["License-File"] == "LICENSE"
    assert {"jax", "equinox", "jit"} <= set(metadata["Keywords"].split(","))
    assert metadata["Description-Content-Type"] == "text/markdown"


def test_every_classifier_is_in_the_index_list(metadata):
    from trove_classifiers import classifiers, deprecated_classifiers

    given = metadata.get_all("Classifier")
    assert [c for c in given if c not in classifiers] == []
    assert [c for c in given if c in deprecated_classifiers] == []
    # PEP 639: with a License-Expression, the License :: classifiers are out.
    assert not [c for c in given if c.startswith("License ::")]
    assert "Typing :: Typed" in given


def test_python_classifiers_start_at_requires_python(metadata):
    versions = [
        c.rsplit(" ", 1)[1]
        for c in metadata.get_all("Classifier")
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    ]
    assert versions == ["3.10", "3.11", "3.12", "3.13"]
    assert metadata["Requires-Python"] == f">={versions[0]}"


def test_no_url_is_invented_before_there_is_a_public_home(metadata):
    # CONTRIBUTING.md ("Publishing") lists where the URLs go on that day.
    assert not re.search(r"^\[project\.urls\]", PYPROJECT, flags=re.M)
    assert metadata.get_all("Project-URL") is None
    assert metadata["Home-page"] is None
    assert "Publishing" in (ROOT / "CONTRIBUTING.md").read_text()


def test_the_runtime_needs_only_jax_equinox_jaxtyping_numpy(metadata):
    runtime = [
        re.split(r"[<>=!~ ;]", r, maxsplit=1)[0]
        for r in metadata.get_all("Requires-Dist")
        if "extra ==" not in r
    ]
    assert sorted(runtime) == ["equinox", "jax", "jaxtyping", "numpy"]
