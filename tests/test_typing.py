"""pyright is clean on src/, and the FAQ's account of what it says is true."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pyright") is None,
    reason="pyright is not installed (it is in the `test` extra: pip install pyright)",
)


def pyright(*paths: str | Path) -> list[dict]:
    """pyright's error diagnostics, with this interpreter's packages on its path."""
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pyright", "--outputjson"),
            *("--pythonpath", sys.executable),
            *map(str, paths),
        ],
        cwd=ROOT,  # picks up [tool.pyright] from pyproject.toml
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(result.stdout)
    return [d for d in report["generalDiagnostics"] if d["severity"] == "error"]


def _describe(errors: list[dict]) -> str:
    return "\n".join(
        f"{e['file']}:{e['range']['start']['line'] + 1}: {e['message']}" for e in errors
    )


def test_pyright_is_clean_on_src():
    errors = pyright()
    assert not errors, _describe(errors)


def test_pyright_rejects_a_scalar_for_an_array_field_as_the_faq_says(tmp_path):
    user_code = tmp_path / "user_code.py"
    user_code.write_text(
        "from jaxtyping import Array, Float\n"
        "import arrayfield as af\n"
        "class MyModule(af.ArrayModule):\n"
        '    x: Float[Array, ""]\n'
        "MyModule(x=0)\n"
    )
    errors = pyright(user_code)
    assert len(errors) == 1, _describe(errors)
    faq = (ROOT / "docs" / "faq.md").read_text()
    assert errors[0]["message"].splitlines()[0] in faq
