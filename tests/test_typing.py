"""What static type checkers say about arrayfield and about code that uses it.

The matrix: user files (the README quick start, the examples, a file of correct
usage, a file of mistakes) through pyright basic and strict and mypy default and
`--strict`, asserting the exact set of (file, line, rule) errors, and what
`reveal_type` says. The same runs check `arrayfield migrate` output. Each checker
mode runs once over all files, the four in parallel.

The case files mark expected errors on their own line: `# expect: pyright=RULE
mypy=CODE` (both modes of that checker), `pyright-strict=RULE` or
`mypy-strict=CODE` (the strict mode only).
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "typing_cases"
FILES = [
    *sorted(CASES.glob("*.py")),
    ROOT / "examples" / "optax_fit.py",
    ROOT / "examples" / "scene_fit.py",
]
MODES = ("pyright", "pyright-strict", "mypy", "mypy-strict")

# The report's own script, untyped on purpose and annotated `np.array` as the
# report was: checked in the default modes only.
UNTYPED_ON_PURPOSE = {"examples/scene_fit.py"}


def _lines_starting(path, text: str) -> list[int]:
    """The lines of `path` that start with `text` (after indentation)."""
    lines = path.read_text().splitlines()
    return [n for n, line in enumerate(lines, 1) if line.strip().startswith(text)]


# Errors in the examples that are not arrayfield's to fix (expectations in the
# case files are comments; the examples stay free of them).
EXAMPLE_ERRORS = {
    # `np.array` is a function, not a type (`arrayfield migrate` rewrites it).
    *(
        ("examples/scene_fit.py", line, mode, rule)
        for line in _lines_starting(ROOT / "examples" / "scene_fit.py", "x: np.array")
        for mode, rule in (
            ("pyright", "reportGeneralTypeIssues"),
            ("mypy", "valid-type"),
        )
    ),
    # mypy does not read an `eqx.field(converter=...)` into `__init__`'s
    # signature (pyright does), so the hand fix's `x=0` is an error to it.
    *(
        ("examples/scene_fit.py", line, "mypy", "arg-type")
        for line in _lines_starting(
            ROOT / "examples" / "scene_fit.py", '"eqx.Module, jnp.asarray converter"'
        )
    ),
    # optax ships neither stubs nor a py.typed marker.
    ("examples/optax_fit.py", 21, "pyright-strict", "reportMissingTypeStubs"),
    ("examples/optax_fit.py", 21, "mypy", "import-untyped"),
    # pyright strict finds JAX's and equinox's own functions partially unknown
    # (jnp.arange, eqx.filter, eqx.filter_value_and_grad, eqx.apply_updates) and
    # what flows from them; and a loop variable read after the loop.
    ("examples/optax_fit.py", 46, "pyright-strict", "reportUnknownMemberType"),
    ("examples/optax_fit.py", 75, "pyright-strict", "reportUnknownMemberType"),
    ("examples/optax_fit.py", 75, "pyright-strict", "reportUnknownArgumentType"),
    ("examples/optax_fit.py", 88, "pyright-strict", "reportUnknownVariableType"),
    ("examples/optax_fit.py", 88, "pyright-strict", "reportUnknownMemberType"),
    ("examples/optax_fit.py", 89, "pyright-strict", "reportUnknownArgumentType"),
    ("examples/optax_fit.py", 90, "pyright-strict", "reportUnknownMemberType"),
    ("examples/optax_fit.py", 90, "pyright-strict", "reportUnknownVariableType"),
    ("examples/optax_fit.py", 97, "pyright-strict", "reportPossiblyUnboundVariable"),
}

# Strict modes also report how completely *other* packages are typed (JAX, NumPy,
# equinox, optax), which changes with their versions. The expectations hold
# exactly for the versions below; with others, these rules are left out of the
# strict modes' comparison (everything else is still compared exactly).
RECORDED_WITH = {
    "jax": "0.10.2",
    "equinox": "0.13.8",
    "jaxtyping": "0.3.11",
    "numpy": "2.4.6",
    "optax": "0.2.8",
}
THIRD_PARTY_RULES = {
    "reportUnknownMemberType",
    "reportUnknownVariableType",
    "reportUnknownArgumentType",
    "reportUnknownParameterType",
    "reportUnknownLambdaType",
    "reportMissingTypeArgument",
    "reportMissingTypeStubs",
    "type-arg",
    "no-any-return",
    "import-untyped",
}


def _comparable(mode: str, errors: set[Error]) -> set[Error]:
    recorded = all(
        importlib.metadata.version(package) == version
        for package, version in RECORDED_WITH.items()
    )
    if "strict" not in mode or recorded:
        return errors
    return {e for e in errors if e[2] not in THIRD_PARTY_RULES}


pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pyright") is None
    or importlib.util.find_spec("mypy") is None,
    reason="pyright and mypy are in the `test` extra: pip install -e '.[test]'",
)

Error = tuple[str, int, str]  # (file relative to the root, line, rule)


def _relative(path: str) -> str:
    resolved = Path(path).resolve()
    if resolved.is_relative_to(ROOT):
        return resolved.relative_to(ROOT).as_posix()
    return resolved.as_posix()


def _files(mode: str) -> list[str]:
    files = [f.relative_to(ROOT).as_posix() for f in FILES]
    if "strict" in mode:
        files = [f for f in files if f not in UNTYPED_ON_PURPOSE]
    return files


def _start(mode: str, tmp: Path, files: list[str]) -> subprocess.Popen[str]:
    if mode.startswith("pyright"):
        config = tmp / f"{mode}.json"
        config.write_text(
            json.dumps(
                {
                    "typeCheckingMode": "strict" if "strict" in mode else "basic",
                    # This checkout's arrayfield, ahead of any installed copy.
                    "extraPaths": [str(ROOT / "src")],
                }
            )
        )
        command = [
            *(sys.executable, "-m", "pyright", "--outputjson"),
            *("-p", str(config), "--pythonpath", sys.executable),
        ]
        env = dict(os.environ)
    else:
        command = [
            *(sys.executable, "-m", "mypy", "--output", "json"),
            *("--cache-dir", str(tmp / f"{mode}-cache")),
            *("--python-executable", sys.executable),
            *(["--strict"] if "strict" in mode else []),
        ]
        env = {**os.environ, "MYPYPATH": str(ROOT / "src")}
    return subprocess.Popen(
        [*command, *files],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _errors(mode: str, stdout: str, checked: set[str]) -> set[Error]:
    found: set[Error] = set()
    if mode.startswith("pyright"):
        for d in json.loads(stdout)["generalDiagnostics"]:
            if d["severity"] == "error":
                line = d["range"]["start"]["line"] + 1
                found.add((_relative(d["file"]), line, d.get("rule", "")))
    else:
        for line in filter(None, stdout.splitlines()):  # "\n" when clean
            d = json.loads(line)
            if d["severity"] == "error":
                found.add((_relative(d["file"]), d["line"], d["code"]))
    # arrayfield's own source is reported too when it is on MYPYPATH: not ours here.
    return {e for e in found if e[0] in checked}


def _revealed(mode: str, stdout: str) -> dict[tuple[str, int], str]:
    """What `reveal_type` said, by (file, line)."""
    found = {}
    if mode.startswith("pyright"):
        for d in json.loads(stdout)["generalDiagnostics"]:
            if d["severity"] == "information":
                line = d["range"]["start"]["line"] + 1
                found[_relative(d["file"]), line] = d["message"]
    else:
        for line in filter(None, stdout.splitlines()):
            d = json.loads(line)
            if d["severity"] == "note" and "Revealed type" in d["message"]:
                found[_relative(d["file"]), d["line"]] = d["message"]
    return found


def _run(jobs: dict[str, list[str]], tmp: Path) -> dict[str, str]:
    """Each mode's output over its files; the modes run in parallel."""
    running = {mode: _start(mode, tmp, files) for mode, files in jobs.items()}
    outputs = {}
    for mode, process in running.items():
        stdout, stderr = process.communicate(timeout=600)
        assert stdout, f"{mode} printed nothing:\n{stderr}"
        outputs[mode] = stdout
    return outputs


def _expected(mode: str) -> set[Error]:
    checker = mode.split("-")[0]
    keys = {checker, mode}
    checked = set(_files(mode))
    expected = {
        (f, line, rule)
        for f, line, m, rule in EXAMPLE_ERRORS
        if m in keys and f in checked
    }
    for path in sorted(CASES.glob("*.py")):
        lines = path.read_text().splitlines()
        for number, text in enumerate(lines, start=1):
            match = re.search(r"# expect:((?: [\w-]+=[\w-]+)+)$", text)
            if match is None:
                continue
            for item in match.group(1).split():
                key, rule = item.split("=")
                if key in keys:
                    expected.add((path.relative_to(ROOT).as_posix(), number, rule))
    return expected


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`arrayfield migrate` outputs (see the end of this file), checked in the
    same checker runs as the matrix."""
    tmp = tmp_path_factory.mktemp("migrated")
    paths = {name: tmp / f"{name}.py" for name in ("before", "converters", "typed")}
    paths["before"].write_text(CONVERTER_SOURCE)
    paths["converters"].write_text(CONVERTER_SOURCE)
    paths["typed"].write_text(TYPED_SOURCE)
    _migrate(paths["converters"])
    _migrate(paths["typed"], "--typed")
    return paths


@pytest.fixture(scope="module")
def checker_outputs(
    tmp_path_factory: pytest.TempPathFactory, migrated: dict[str, Path]
) -> dict[str, tuple[list[str], str]]:
    """One run per mode over every file: the files, and the checker's output."""
    tmp = tmp_path_factory.mktemp("typing")
    outputs = [str(migrated["converters"]), str(migrated["typed"])]
    jobs = {mode: [*_files(mode), *outputs] for mode in MODES}
    jobs["pyright"].append(str(migrated["before"]))
    return {mode: (jobs[mode], stdout) for mode, stdout in _run(jobs, tmp).items()}


@pytest.fixture(scope="module")
def matrix(checker_outputs) -> dict[str, set[Error]]:
    return {
        mode: _errors(mode, stdout, {_relative(f) for f in files})
        for mode, (files, stdout) in checker_outputs.items()
    }


# (start, end) of what reveal_type says; the middle spells out the nested lists.
_NUMBERS = "bool | int | float | complex | "
REVEALED = {
    "pyright": {
        "scene.x": ('Type of "scene.x" is "Array"', ""),
        "Scene": ('Type of "Scene" is "type[Scene]"', ""),
        "Scene.__init__": (
            f'Type of "Scene.__init__" is "(self: Scene, x: Array | {_NUMBERS}',
            ', name: str = "scene") -> None"',
        ),
    },
    "mypy": {
        "scene.x": ('Revealed type is "jax._src.basearray.Array"', ""),
        "Scene": (
            f'Revealed type is "def (x: jax._src.basearray.Array | {_NUMBERS}',
            ', name: str =) -> reveal.Scene"',
        ),
    },
}


@pytest.mark.parametrize("mode", MODES)
def test_checkers_reveal_the_dataclass_signature_and_the_array_type(
    checker_outputs, mode
):
    _, stdout = checker_outputs[mode]
    revealed = _revealed(mode, stdout)
    source = (CASES / "reveal.py").read_text().splitlines()
    checker = mode.split("-")[0]
    seen = set()
    for number, text in enumerate(source, start=1):
        match = re.fullmatch(r"\s*reveal_type\((.*)\)", text)
        if match is None or match.group(1) not in REVEALED[checker]:
            continue
        said = revealed.get(("tests/typing_cases/reveal.py", number), "")
        start, end = REVEALED[checker][match.group(1)]
        assert said.startswith(start) and said.endswith(end), said
        seen.add(match.group(1))
    assert seen == set(REVEALED[checker])


def test_checkers_see_the_class_keywords_arrayfield_takes():
    # Checkers read ArrayModule from _typing.py: its __init_subclass__ must take
    # the keywords the runtime class takes.
    from arrayfield._module import ArrayModule

    tree = ast.parse((ROOT / "src" / "arrayfield" / "_typing.py").read_text())
    declared = next(
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "__init_subclass__"
    )
    runtime = inspect.signature(ArrayModule.__init_subclass__).parameters.values()
    assert [a.arg for a in declared.args.kwonlyargs] == [
        p.name for p in runtime if p.kind is p.KEYWORD_ONLY
    ]


def _describe(errors: set[Error]) -> str:
    return "\n".join(f"  {f}:{line}: {rule}" for f, line, rule in sorted(errors))


@pytest.mark.parametrize("mode", MODES)
def test_checker_reports_exactly_the_expected_errors(matrix, mode):
    cases = set(_files(mode))
    found = _comparable(mode, {e for e in matrix[mode] if e[0] in cases})
    expected = _comparable(mode, _expected(mode))
    assert found == expected, (
        f"{mode}: unexpected errors:\n{_describe(found - expected)}\n"
        f"expected but not reported:\n{_describe(expected - found)}"
    )


def test_mistakes_file_expects_an_error_in_every_mode():
    # A mistake both checkers must catch, in both modes: not a strict-only one.
    for mode in MODES:
        in_mistakes = {e for e in _expected(mode) if e[0].endswith("mistakes.py")}
        assert len(in_mistakes) >= 14, mode


@pytest.mark.parametrize(
    ("case", "document", "heading"),
    [
        ("readme_quickstart.py", "README.md", "## Quick start"),
        ("docs_typing.py", "docs/typing.md", "# Type checking"),
    ],
)
def test_documented_block_is_its_checked_case_file(case, document, heading):
    section = (ROOT / document).read_text().split(heading, 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert block == (CASES / case).read_text()


# docs/typing.md's table of what each checker says, row by row.
CLAIM_ROWS = {
    "the block above": "tests/typing_cases/docs_typing.py",
    "the README quick start": "tests/typing_cases/readme_quickstart.py",
    "`examples/optax_fit.py`": "examples/optax_fit.py",
    "`examples/scene_fit.py`": "examples/scene_fit.py",
}
_RULE = re.compile(r"`(report[A-Za-z]+|[a-z]+(?:-[a-z]+)+)`")


def _claims() -> dict[str, dict[str, str]]:
    page = (ROOT / "docs" / "typing.md").read_text()
    table = page.split("<!-- typing-claims -->\n", 1)[1].split("<!--", 1)[0]
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in table.strip().splitlines()[2:]
    ]
    return {row[0]: dict(zip(MODES, row[1:], strict=True)) for row in rows}


def test_typing_page_says_exactly_what_the_matrix_asserts():
    claims = _claims()
    assert set(claims) == set(CLAIM_ROWS)
    for label, cells in claims.items():
        path = CLAIM_ROWS[label]
        for mode, cell in cells.items():
            where = f"docs/typing.md, {label}, {mode}: {cell!r}"
            if cell == "not checked":
                assert path not in _files(mode), where
                continue
            assert path in _files(mode), where
            errors = [e for e in _expected(mode) if e[0] == path]
            if cell == "clean":
                assert not errors, where
                continue
            count = re.fullmatch(r"(\d+) errors?: .*", cell)
            assert count is not None, where
            assert int(count.group(1)) == len(errors), where
            assert set(_RULE.findall(cell)) == {rule for _, _, rule in errors}, where


# What both checkers say about a bare default on an `af.Field`, as the docs quote it.
BARE_DEFAULT = {
    "pyright": 'Type "float" is not assignable to declared type "Field[Array]"',
    "mypy": 'Incompatible types in assignment (expression has type "float", '
    'variable has type "Field[Array]")',
}


def test_bare_default_message_is_the_checkers_and_the_docs_quote_it(
    checker_outputs,
):
    case = "tests/typing_cases/bare_default.py"
    line = next(
        n
        for n, text in enumerate((ROOT / case).read_text().splitlines(), 1)
        if "= 1.0  # expect" in text
    )
    for mode in ("pyright", "mypy"):
        _, stdout = checker_outputs[mode]
        if mode == "pyright":
            messages = [
                d["message"]
                for d in json.loads(stdout)["generalDiagnostics"]
                if _relative(d["file"]) == case
                and d["range"]["start"]["line"] == line - 1
            ]
        else:
            messages = [
                d["message"]
                for d in map(json.loads, filter(None, stdout.splitlines()))
                if _relative(d["file"]) == case and d["line"] == line
            ]
        assert any(BARE_DEFAULT[mode] in m for m in messages), messages
    for page in ("docs/typing.md", "docs/faq.md"):
        text = " ".join((ROOT / page).read_text().split())
        for quote in BARE_DEFAULT.values():
            assert quote in text, f"{page} does not quote {quote!r}"
        assert "af.field(default=1.0)" in text, page


def test_pyright_is_clean_on_src():
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pyright", "--outputjson"),
            *("--pythonpath", sys.executable),
        ],
        cwd=ROOT,  # picks up [tool.pyright] from pyproject.toml
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(result.stdout)
    errors = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
    assert not errors, "\n".join(
        f"{e['file']}:{e['range']['start']['line'] + 1}: {e['message']}" for e in errors
    )


# `arrayfield migrate` output: what a type checker accepted before, it accepts after.
CONVERTER_SOURCE = """\
import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float


class Scene(eqx.Module):
    x: Float[Array, ""] = eqx.field(converter=jnp.asarray)
    position: Float[Array, "2"] = eqx.field(converter=jnp.asarray, default=(0, 0))
    name: str = "scene"


scene = Scene(x=0, position=[0.5, 1.5])
total: Array = scene.x + scene.position
"""

TYPED_SOURCE = """\
import equinox as eqx
import numpy as np
from jaxtyping import Array, Float, Int


class Scene(eqx.Module):
    x: Float[Array, ""]
    position: Float[Array, "2"]
    legacy: np.array
    steps: Int[Array, ""] = 0
    mask: Float[Array, "2"] | None = None
    name: str = "scene"


scene = Scene(x=0, position=[0.5, 1.5], legacy=[1, 2])
total: Array = scene.x + scene.position + scene.steps
assert scene.legacy.dtype == np.int64 or scene.legacy.dtype == np.int32
"""


def _migrate(path: Path, *options: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "arrayfield", "migrate", "-q", *options, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr


def test_migrate_output_type_checks_clean(matrix, migrated):
    converters, typed = migrated["converters"], migrated["typed"]
    assert 'x: af.Field[Float[Array, ""]]' in converters.read_text()
    assert "af.field(default=0)" in typed.read_text()
    # The premise: pyright read the converter, and accepted the 0.
    for mode, errors in matrix.items():
        ours = {e for e in errors if e[0].startswith(str(converters.parent))}
        ours = _comparable(mode, ours)
        assert not ours, f"{mode}:\n{_describe(ours)}"
    for path in (converters, typed):  # and the migrated code runs
        run = subprocess.run(
            [sys.executable, str(path)], capture_output=True, text=True, timeout=300
        )
        assert run.returncode == 0, run.stderr
