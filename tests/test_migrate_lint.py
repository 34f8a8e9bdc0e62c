"""`arrayfield migrate` adds no lint to a project that had none (issue 21).

Real ruff, with the `I` (isort) and `F` (pyflakes) rules and F722 not ignored,
on projects before and after the rewrite: the new `import arrayfield as af`
goes where isort puts a third-party import (or wherever the project's
`known-first-party` says), and the report says the one config line its
suggested `Float[Array, ""]` annotation needs.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import run_cli

GOLDEN = Path(__file__).parent / "migrate_golden"
RUFF_CONFIG = '[tool.ruff.lint]\nselect = ["I", "F"]\n'


def ruff(root: Path) -> subprocess.CompletedProcess[str]:
    ruff_path = shutil.which("ruff", path=str(Path(sys.executable).parent))
    assert ruff_path is not None
    return subprocess.run(
        [ruff_path, "check", "--no-cache", "--output-format", "concise", "."],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
    )


def write_project(root: Path, files: dict[str, str], config: str = RUFF_CONFIG):
    (root / "pyproject.toml").write_text(config)
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def lint_clean_golden_inputs(tmp_path: Path) -> list[str]:
    """The golden inputs ruff finds clean, each on its own."""
    clean = []
    for source in sorted(GOLDEN.glob("*_in.py")):
        case = source.name.removesuffix("_in.py")
        root = tmp_path / "probe" / case
        root.mkdir(parents=True)
        write_project(root, {f"{case}.py": source.read_text()})
        if ruff(root).returncode == 0:
            clean.append(case)
    return clean


@pytest.mark.parametrize(
    "flags", [(), ("--fix",), ("--typed", "--fix")], ids=["plain", "fix", "typed"]
)
def test_golden_inputs_that_ruff_accepts_stay_accepted(tmp_path, flags):
    clean = lint_clean_golden_inputs(tmp_path)
    assert len(clean) >= 15
    assert "guarded_import" in clean  # its kept `try: import equinox` is marked
    for case in clean:
        root = tmp_path / "project" / case
        root.mkdir(parents=True)
        write_project(root, {f"{case}.py": (GOLDEN / f"{case}_in.py").read_text()})
        result = run_cli("migrate", "-q", *flags, ".", cwd=root)
        assert result.returncode == 0, result.stderr
        after = ruff(root)
        assert after.returncode == 0, f"{case}: {after.stdout}"


PACKAGE = {
    "pkg/__init__.py": "from equinox import Module as Module\n",
    # A plain import of another package before equinox's `from` import.
    "pkg/numeric.py": """\
        import numpy as np
        from equinox import Module


        class Grid(Module):
            values: np.ndarray
        """,
    # No third-party import at all: arrayfield gets a section of its own.
    "pkg/scene.py": """\
        import os

        from pkg import Module
        from pkg.numeric import Grid


        class Scene(Module):
            path: str = os.sep
            grid: Grid
        """,
    # Third-party imports sorted after arrayfield, and from-imports.
    "pkg/layers.py": """\
        import functools

        import equinox as eqx
        import jax
        from jaxtyping import Array, Float

        from pkg import numeric


        class Layer(eqx.Module):
            w: Float[Array, "..."]
            grid: numeric.Grid
            cached = functools.cache(jax.numpy.ones)
        """,
}


def test_the_new_import_lands_where_isort_puts_it(tmp_path):
    write_project(tmp_path, PACKAGE)
    assert ruff(tmp_path).returncode == 0
    assert run_cli("migrate", "-q", ".", cwd=tmp_path).returncode == 0
    after = ruff(tmp_path)
    assert after.returncode == 0, after.stdout
    scene = (tmp_path / "pkg/scene.py").read_text()
    assert scene.startswith(
        "import os\n\nimport arrayfield as af\n\nfrom pkg.numeric import Grid\n"
    )


def test_known_first_party_puts_arrayfield_in_that_section(tmp_path):
    config = (
        RUFF_CONFIG + '\n[tool.ruff.lint.isort]\nknown-first-party = ["arrayfield"]\n'
    )
    write_project(
        tmp_path,
        {
            "model.py": """\
                import equinox as eqx
                import jax

                from zoo import animals


                class Model(eqx.Module):
                    x: jax.Array
                    kind: str = animals.CAT
                """,
            "zoo/__init__.py": "",
            "zoo/animals.py": 'CAT = "cat"\n',
        },
        config=config,
    )
    assert ruff(tmp_path).returncode == 0
    assert run_cli("migrate", "-q", ".", cwd=tmp_path).returncode == 0
    after = ruff(tmp_path)
    assert after.returncode == 0, after.stdout
    text = (tmp_path / "model.py").read_text()
    assert "import jax\n\nimport arrayfield as af\nfrom zoo import animals\n" in text


SCALAR = {
    "model.py": """\
        import equinox as eqx


        class Model(eqx.Module):
            rate: float
        """
}


def test_af001_names_the_f722_config_line_when_the_project_needs_it(tmp_path):
    write_project(tmp_path, SCALAR)
    result = run_cli("migrate", "--check", ".", cwd=tmp_path)
    assert "AF001" in result.stdout
    assert 'add "F722" to the ignore list of [tool.ruff.lint]' in result.stdout

    # The note is true: the suggested annotation is F722 under this config.
    model = tmp_path / "model.py"
    model.write_text(
        model.read_text()
        .replace(
            "import equinox as eqx\n",
            "import equinox as eqx\nfrom jaxtyping import Array, Float\n",
        )
        .replace("rate: float", 'rate: Float[Array, ""]')
    )
    assert "F722" in ruff(tmp_path).stdout


def test_af001_says_nothing_of_f722_when_the_project_ignores_it(tmp_path):
    write_project(tmp_path, SCALAR, config=RUFF_CONFIG + 'ignore = ["F722"]\n')
    result = run_cli("migrate", "--check", ".", cwd=tmp_path)
    assert "AF001" in result.stdout
    assert "F722" not in result.stdout
