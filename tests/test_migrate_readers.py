"""`arrayfield migrate` reads a file with `ast` unless it writes or previews
the file's new text (issue 21: speed); the report must be the one libcst gives,
byte for byte. Each input the migrate tests use (the golden files, the skyfit
project, the benchmark tree, the repros written by `tests/test_migrate*.py`) is
run through the command line twice in this process, once with
`_runner.READ_WITH_AST` off (every file read with libcst), and the outputs and
exit statuses compared; `--check` on Module classes never imports libcst.
"""

from __future__ import annotations

import ast
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from arrayfield.__main__ import main
from arrayfield.migrate import _runner
from arrayfield.migrate._check_ast import check_source
from arrayfield.migrate._syntax import Undecidable
from arrayfield.migrate._transform import migrate_source
from helpers import run_code

ROOT = Path(__file__).parents[1]
TESTS = ROOT / "tests"
sys.path.insert(0, str(ROOT / "benchmarks"))
from migrate_tree import build_tree  # noqa: E402

# The reports compared: those the ast reading gives (changed files' text
# unread), and the patches spliced from its plan (`_splice`).
MODES = (
    ["--check"],
    ["--check", "--fix"],
    ["--check", "--typed"],
    ["--diff"],
    ["--diff", "--fix", "--typed"],
    ["--diff", "--typed"],
)

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

# What the fixtures above leave out: columns after non-ASCII text, values whose
# source is cut to 40 characters or written in parentheses, a converter's
# position, a class made by type(...), a string annotation, `# noqa`.
EDGES = {
    "edges.py": """\
import functools

import equinox as eqx
import jax
import numpy as np
from jaxtyping import Array, Float


class Ünit(eqx.Module): größe: float
class Window(eqx.Module):
    window: jax.Array = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
    decay: Float[Array, ""] = -0.5  # noqa: AF007
    scale: "Float[Array, '']" = 2.0
    data: jax.Array = eqx.field(default="ü", converter=np.asarray)
    size: "int"

    def __init__(self, n):
        self.size = n
        self.window = [n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n]


def make(names):
    return type(names[0], (eqx.Module,), {"__annotations__": {"x": float}})


@functools.cache
def make_once(name):
    return type(name, (Window,), {})
""",
    # Parentheses libcst prints and ast leaves out: this file goes to libcst.
    "parens.py": """\
import equinox as eqx
from jaxtyping import Array, Float


class Eps(eqx.Module):
    eps: Float[Array, ""] = (1e-5)
""",
}


def _repros() -> list[dict[str, str]]:
    """The projects the migrate tests write: every dict of `name.py: source`
    and every string of Python with a class in it, in `tests/test_migrate*.py`."""
    found: list[dict[str, str]] = []
    for path in sorted(TESTS.glob("test_migrate*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict) and node.keys:
                keys = [getattr(key, "value", None) for key in node.keys]
                values = [getattr(value, "value", None) for value in node.values]
                if all(isinstance(k, str) and k.endswith(".py") for k in keys) and all(
                    isinstance(v, str) for v in values
                ):
                    found.append(dict(zip(keys, values, strict=True)))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = textwrap.dedent(node.value)
                if "class " not in text:
                    continue
                try:
                    ast.parse(text)
                except SyntaxError:
                    continue
                found.append({"repro.py": text})
    return found


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _inputs(root: Path) -> list[Path]:
    """Directories to run the command in, each holding one input."""
    dirs = []

    def new(name: str) -> Path:
        directory = root / name
        directory.mkdir()
        dirs.append(directory)
        return directory

    golden = sorted((TESTS / "migrate_golden").glob("*_in.py"))
    everything = new("golden")
    for number, path in enumerate(golden):
        shutil.copy(path, new(f"golden_{number}") / path.name)
        shutil.copy(path, everything / path.name)
    shutil.copytree(TESTS / "migrate_project", new("project") / "migrate_project")
    build_tree(new("benchmark"), 60)
    _write(new("subclasses"), SUBCLASSES)
    _write(new("edges"), EDGES)
    for number, files in enumerate(_repros()):
        _write(new(f"repro_{number}"), files)
    return dirs


def _report(directory: Path, args: list[str], capfd, *, with_ast: bool) -> str:
    _runner.READ_WITH_AST = with_ast
    try:
        status = main(["migrate", "-j", "1", *args, "."])
    finally:
        _runner.READ_WITH_AST = True
    out, err = capfd.readouterr()
    return f"exit {status}\n--- stdout\n{out}--- stderr\n{err}"


def test_the_repros_are_found():
    repros = _repros()
    assert len(repros) >= 40
    assert any(len(files) > 2 for files in repros)


@pytest.mark.parametrize("args", MODES, ids=" ".join)
def test_ast_and_libcst_readings_give_the_same_report(
    tmp_path, monkeypatch, capfd, args
):
    directories = _inputs(tmp_path)
    for directory in directories:
        monkeypatch.chdir(directory)
        expected = _report(directory, args, capfd, with_ast=False)
        assert _report(directory, args, capfd, with_ast=True) == expected, (
            directory.name
        )


def _decided(root: Path) -> tuple[int, list[str]]:
    """How many Module files `ast` decides with the libcst verdict, and the
    names of those it leaves to libcst."""
    files, _ = _runner.find_files([str(root)], [])
    contents, _ = _runner.read_files(files)
    index, errors = _runner.index_project(contents)
    assert not errors
    decided, undecided = 0, []
    for path in _runner.files_to_rewrite(contents, index):
        context = index.context(str(path))
        full = migrate_source(contents[path], context)
        try:
            checked = check_source(contents[path], context)
        except Undecidable:
            undecided.append(path.name)
            continue
        assert checked.diagnostics == full.diagnostics, path
        assert checked.changed == full.changed, path
        decided += 1
    return decided, undecided


def test_ast_decides_the_subclasses_itself(tmp_path):
    _write(tmp_path, SUBCLASSES)
    decided, undecided = _decided(tmp_path)
    assert (decided, undecided) == (2, [])
    full = migrate_source((tmp_path / "pkg/parts.py").read_bytes())
    assert full.diagnostics == ()  # without the index: no context, no report


def test_ast_decides_the_benchmark_tree_and_skyfit(tmp_path):
    build_tree(tmp_path / "tree", 40)
    assert _decided(tmp_path / "tree") == (5, [])
    shutil.copytree(TESTS / "migrate_project/skyfit", tmp_path / "skyfit")
    decided, undecided = _decided(tmp_path / "skyfit")
    assert decided >= 6 and not undecided


def test_ast_leaves_what_it_may_read_otherwise_to_libcst(tmp_path):
    source = (
        "import equinox as eqx\nimport jax\n\n\nclass M(eqx.Module):\n"
        '    x: "jax." "Array" = (1, 2)\n'
    )
    (tmp_path / "m.py").write_text(source)
    assert _decided(tmp_path) == (0, ["m.py"])


def _imports_libcst(root: Path, *args: str) -> str:
    script = f"""
import sys
from arrayfield.__main__ import main
status = main(["migrate", "-q", *{list(args)!r}, "proj"])
print(status, "libcst" in sys.modules)
"""
    return run_code(script, cwd=root, timeout=120).stdout.split()[-2:]


def test_check_never_imports_libcst_and_diff_does(tmp_path):
    build_tree(tmp_path, 30)
    # base.py would change: the exit status says so, from ast alone.
    assert _imports_libcst(tmp_path, "--check") == ["1", "False"]
    assert _imports_libcst(tmp_path, "--check", "--fix") == ["1", "False"]
    assert _imports_libcst(tmp_path, "--check", "--diff") == ["1", "True"]
