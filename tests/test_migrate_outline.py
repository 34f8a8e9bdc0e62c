"""Files that need no rewrite get their diagnostics from an outline (issue 21:
speed): the same diagnostics, position for position, as a full libcst parse."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from arrayfield.migrate import _runner
from arrayfield.migrate._outline import needs_full_parse, outline_diagnostics
from arrayfield.migrate._transform import migrate_source

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from migrate_tree import build_tree  # noqa: E402

SUBCLASSES = {
    "pkg/__init__.py": "",
    "pkg/base.py": "import equinox as eqx\n\n\nclass Base(eqx.Module):\n    pass\n",
    "pkg/parts.py": '''\
"""Subclasses of a base class defined elsewhere: no rewrite, only diagnostics."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from .base import Base


def _fast_shape(shape):
    return [s + s % 2 for s in shape]


class Part(Base):
    """A part."""

    rate: float
    name: str
    shape: jax.Array
    eps: Float[Array, ""] = 1e-5
    steps: Int[Array, ""] = 3
    grid: jnp.array
    window: jax.Array = (3, 3)
    kernel: jax.Array
    momentum: Float[Array, ""]

    def __init__(self, rate, name, shape):
        self.rate = rate
        self.name = f"part-{name}"
        self.shape = shape
        if rate:
            self.grid = _fast_shape(shape)
        self.window = [4, 4]
        self.eps = 2e-5
        self.kernel = [1, 2]
        self.momentum = 0.9

    class Inner(Base):
        scale: float

    def __call__(self, x):
        def helper():
            class Local(Base):
                width: float  # noqa: AF001

            return Local

        return jnp.zeros(self.shape) + x * self.rate + helper()


class Child(Part):
    extra: complex

    def grow(self):
        self.extra = 1j
        return jnp.fft.rfftfreq(self.grid[-1])
''',
}


def diagnostics_both_ways(root: Path) -> list[tuple[str, list, list]]:
    files, _ = _runner.find_files([str(root)], [])
    contents, _ = _runner.read_files(files)
    index, errors = _runner.index_project(contents, workers=1)
    assert not errors
    compared = []
    for path in _runner.files_to_rewrite(contents, index):
        context = index.context(str(path))
        data = contents[path]
        if needs_full_parse(data, context, fix=False, typed=False):
            continue
        full = migrate_source(data, context)
        assert not full.changed
        _, _, outlined = outline_diagnostics(data, context)
        compared.append((path.name, outlined, list(full.diagnostics)))
    return compared


def test_outline_gives_the_full_parse_diagnostics_on_subclasses(tmp_path):
    for name, text in SUBCLASSES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    compared = diagnostics_both_ways(tmp_path)
    assert [name for name, *_ in compared] == ["parts.py"]
    ((_, outlined, full),) = compared
    assert len(full) >= 10
    assert any("on line 35" in d.message for d in full)
    assert any("on line 36" in d.message for d in full)
    assert outlined == full


def test_outline_gives_the_full_parse_diagnostics_on_the_benchmark_tree(tmp_path):
    build_tree(tmp_path, 40)
    compared = diagnostics_both_ways(tmp_path)
    assert len(compared) == 4
    for name, outlined, full in compared:
        assert full, name
        assert outlined == full, name


def test_outline_gives_the_full_parse_diagnostics_on_skyfit(tmp_path):
    shutil.copytree(ROOT / "tests/migrate_project/skyfit", tmp_path / "skyfit")
    compared = diagnostics_both_ways(tmp_path / "skyfit")
    assert compared
    for name, outlined, full in compared:
        assert outlined == full, name
