"""The package's floors: every import points down, and nothing circles.

Read from the source with `ast`, function-level imports included (they are how a
circle hides). Imports under `if TYPE_CHECKING:` are left out: type checkers follow
them, the interpreter never does. See docs/architecture.md for what each floor is.
"""

import ast
import importlib
import shutil
import sys
from pathlib import Path

import pytest

import arrayfield

SOURCE = Path(arrayfield.__file__).parent

# The core's modules, lowest floor first. A module may import only modules listed
# before it; the ground floor imports no arrayfield module at all, and dispatch
# (`_jit`, with its program keys) only the ground floor and the dispatch modules
# before it. A new module must be given its place here.
GROUND = ("_env", "_errors", "_hooks", "_facts", "_typing")
FIELDS = (
    "_spec",
    "_convert",
    "_field",
    "_declare",
    "_validate",
    "_module",
    "_normalize",
)
# JAX's and equinox's private names, read for dispatch and diagnostics alone:
# the fields stand below them and never reach them.
PRIVATE = ("_jax_private", "_eqx_private", "_tracing")
DISPATCH = (
    "_program_key",
    "_blocks",
    "_numbers",
    "_kept_families",
    "_executables",
    "_program",
    "_layouts",
    "_aot",
    "_jit",
)
DIAGNOSTICS = tuple(
    f"diagnostics.{name}"
    for name in (
        "_paths",
        "_annotations",
        "_signature",
        "_hints",
        "_diff",
        "_program_diff",
        "_trial",
        "_repeats",
        "_record",
        "_unasked",
        "_retrace",
        "_programs",
        "_findings",
        "_audit",
    )
)
# Operating many fields at scale (af.count_compiles): reads JAX's events only.
SCALE = ("_compiles", "_compile_cache", "_export")
# Dispatch's own state: the diagnostics read programs (`_program_key`,
# `_numbers`) but never these.
DISPATCH_STATE = ("_executables", "_program", "_layouts", "_jit")
BELOW_DISPATCH = (*GROUND, *PRIVATE, *DISPATCH)
ORDER = (*GROUND, *FIELDS, *PRIVATE, *DISPATCH, *DIAGNOSTICS, *SCALE)
# Entry points: the public table loads any module lazily; the command line reaches
# only the version and the codemod.
ENTRY_POINTS = {"__init__", "__main__", "diagnostics.__init__"}
# What the codemod may import besides itself: it must run without JAX.
MIGRATE_THIRD_PARTY: set[str] = set()
# The codemod's own floors, lowest first, by the same rule: a module imports
# only those before it. Every module of `migrate/_checks/` (one per AF code)
# stands on the `_checks` floor, so none of them may import another; the
# package's `__init__` (the list of rules) stands above them.
MIGRATE = tuple(
    f"migrate.{name}"
    for name in (
        # ground: no other codemod module
        "_diagnostics",
        "_lint",
        "_patch",
        "_syntax",
        "_text",
        "_walk",
        "_write",
        # reading source
        "_bindings",
        "_facts",
        "_annotations",
        # the project
        "_index",
        "_site",
        "_checks",
        "_checks.__init__",
        # one file: analysis, then rewrite
        "_read",
        "_arguments",
        "_imports",
        "_splice",
        # the command
        "_runner",
        "_cli",
    )
)
MIGRATE_ENTRY_POINTS = {"migrate.__init__"}


def _module_name(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth, outside `if TYPE_CHECKING:` blocks."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking_block(child):
                for other in child.orelse:  # the runtime branch
                    visit(other)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            visit(child)

    visit(tree)
    return found


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The absolute name of the module a `from ... import` statement reads."""
    if node.level == 0:
        return node.module or ""
    package = module.split(".")[:-1]  # a package's __init__ is its package
    package = package[: len(package) - (node.level - 1)]
    return ".".join(["arrayfield", *package, *([node.module] if node.module else [])])


def _reached(module: str, node: ast.Import | ast.ImportFrom, modules: set[str]):
    """`(our modules, third-party top-level names)` an import in `module` reaches.

    `from .pkg import sub` reaches the submodule, not the package's `__init__`.
    """
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = _absolute(module, node)
        names = [f"{base}.{alias.name}" for alias in node.names]
        if not any(_own(name, modules, exact=True) for name in names):
            names = [base]
    ours = {found for name in names if (found := _own(name, modules)) is not None}
    others = {
        name.split(".")[0]
        for name in names
        if not name.startswith("arrayfield")
        and name.split(".")[0] not in sys.stdlib_module_names
    }
    return ours - {module}, others


def _third_party_names(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The full names an import statement reads outside arrayfield."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = _absolute(module, node)
        names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return [name for name in names if not name.startswith("arrayfield")]


def _own(name: str, modules: set[str], exact: bool = False) -> str | None:
    """The arrayfield module an absolute name refers to, if any (`exact`: only a
    name that is itself a module)."""
    if name == "arrayfield":
        return "__init__"
    if not name.startswith("arrayfield."):
        return None
    rest = name.removeprefix("arrayfield.")
    while rest:
        for candidate in (rest, f"{rest}.__init__"):
            if candidate in modules:
                return candidate
        if exact:
            return None
        rest = rest.rpartition(".")[0]
    return None


def _migrate_floor(module: str) -> int | None:
    """The floor of a codemod module in `MIGRATE` (None: not placed)."""
    if module.startswith("migrate._checks.") and module != "migrate._checks.__init__":
        module = "migrate._checks"
    return MIGRATE.index(module) if module in MIGRATE else None


def _migrate_floor_problems(module: str, where: str, targets: set[str]) -> list[str]:
    """The codemod's imports of its own modules that point up or sideways."""
    if module in MIGRATE_ENTRY_POINTS:
        return []
    rank = _migrate_floor(module)
    problems = []
    for target in sorted(t for t in targets if t.startswith("migrate.")):
        floor = _migrate_floor(target)
        if target in MIGRATE_ENTRY_POINTS or floor is None or rank is None:
            problems.append(f"{where}: imports {target}")
        elif floor >= rank:
            problems.append(f"{where}: imports {target}, above or beside it")
    return problems


def layer_violations(root: Path) -> list[str]:
    """Every import in the package at `root` that breaks the floors, as text."""
    paths = {_module_name(path, root): path for path in root.rglob("*.py")}
    modules = set(paths)
    problems: list[str] = []
    for module, path in sorted(paths.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_migrate = module.startswith("migrate.")
        if not in_migrate and module not in ENTRY_POINTS and module not in ORDER:
            problems.append(f"{module}: not placed on a floor (add it to ORDER)")
            continue
        placed = module in MIGRATE_ENTRY_POINTS or _migrate_floor(module) is not None
        if in_migrate and not placed:
            problems.append(f"{module}: not placed on a floor (add it to MIGRATE)")
            continue
        for node in _imports(tree):
            targets, third_party = _reached(module, node, modules)
            where = f"{module}:{node.lineno}"
            if in_migrate:
                problems += [
                    f"{where}: the codemod imports {name}"
                    for name in sorted(
                        {t for t in targets if not t.startswith("migrate.")}
                        | (third_party - MIGRATE_THIRD_PARTY)
                    )
                ]
                problems += _migrate_floor_problems(module, where, targets)
                continue
            if module not in PRIVATE:
                problems += [
                    f"{where}: reads the private {name} outside {PRIVATE}"
                    for name in _third_party_names(module, node)
                    if name.startswith(("jax._src", "jaxlib", "equinox._"))
                ]
            if module in ENTRY_POINTS:
                continue
            rank = ORDER.index(module)
            for target in sorted(targets):
                if target in ENTRY_POINTS or target.startswith("migrate."):
                    problems.append(f"{where}: imports {target}")
                elif module in GROUND:
                    problems.append(f"{where}: the ground floor imports {target}")
                elif module in DISPATCH and target not in BELOW_DISPATCH:
                    problems.append(f"{where}: dispatch imports {target}")
                elif module in DIAGNOSTICS and target in DISPATCH_STATE:
                    # What a trace did reaches them through `_tracing.record`.
                    problems.append(f"{where}: a diagnostic imports {target}")
                elif ORDER.index(target) >= rank:
                    problems.append(f"{where}: imports {target}, above or beside it")
    return problems


def test_every_import_points_down_a_floor():
    assert layer_violations(SOURCE) == []


# A module a maintainer can read in one sitting: past this, split it by job.
MOST_LINES = 700


def test_no_module_is_longer_than_a_maintainer_reads_in_one_sitting():
    long = {
        str(path.relative_to(SOURCE)): n
        for path in SOURCE.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MOST_LINES
    }
    assert long == {}


def _copy_of_source(tmp_path: Path) -> Path:
    copy = tmp_path / "arrayfield"
    shutil.copytree(SOURCE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


@pytest.mark.parametrize(
    ("module", "statement", "expected"),
    [
        (
            "_convert.py",
            "def later():\n    from ._module import ArrayModule\n",
            "_convert:",
        ),
        ("_facts.py", "from . import _jit\n", "the ground floor imports _jit"),
        (
            "_convert.py",
            "from jax._src import core\n",
            "reads the private jax._src.core outside",
        ),
        (
            "diagnostics/_audit.py",
            "from equinox import _jit\n",
            "reads the private equinox._jit outside",
        ),
        ("_jit.py", "from ._module import ArrayModule\n", "dispatch imports _module"),
        (
            "diagnostics/_retrace.py",
            "from .. import _program\n",
            "a diagnostic imports _program",
        ),
        (
            "_program_key.py",
            "from . import _jit\n",
            "imports _jit, above or beside it",
        ),
        (
            "_field.py",
            "from .diagnostics import _hints\n",
            "imports diagnostics._hints",
        ),
        ("migrate/_cli.py", "import jax\n", "the codemod imports jax"),
        (
            "migrate/_cli.py",
            "from .. import _convert\n",
            "the codemod imports _convert",
        ),
        # A deferred import is an import: issue 30 found a circle made of one.
        (
            "migrate/_bindings.py",
            "def later():\n    from ._imports import can_bind\n",
            "migrate._bindings:",
        ),
        (
            "migrate/_checks/af001_scalar_field.py",
            "from . import af002_shape_field\n",
            "imports migrate._checks.af002_shape_field, above or beside it",
        ),
        ("migrate/_write.py", "from . import _cli\n", "imports migrate._cli, above"),
    ],
)
def test_an_upward_import_is_reported(tmp_path, module, statement, expected):
    copy = _copy_of_source(tmp_path)
    target = copy / module
    target.write_text(target.read_text(encoding="utf-8") + "\n" + statement)
    problems = layer_violations(copy)
    assert any(expected in problem for problem in problems), problems


def test_an_unplaced_module_is_reported(tmp_path):
    copy = _copy_of_source(tmp_path)
    (copy / "_newcomer.py").write_text("X = 1\n")
    assert layer_violations(copy) == [
        "_newcomer: not placed on a floor (add it to ORDER)"
    ]


def test_an_unplaced_codemod_module_is_reported(tmp_path):
    copy = _copy_of_source(tmp_path)
    (copy / "migrate" / "_newcomer.py").write_text("X = 1\n")
    (copy / "migrate" / "_checks" / "af999_new_code.py").write_text("X = 1\n")
    assert layer_violations(copy) == [
        "migrate._newcomer: not placed on a floor (add it to MIGRATE)"
    ]


def test_type_checking_imports_are_not_runtime_imports(tmp_path):
    copy = _copy_of_source(tmp_path)
    target = copy / "_errors.py"
    target.write_text(
        target.read_text(encoding="utf-8")
        + "\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from ._module import ArrayModule\n"
    )
    assert layer_violations(copy) == []


def _type_checking_imports() -> dict[str, str]:
    """`name -> module` of the `if TYPE_CHECKING:` imports in `__init__.py`."""
    tree = ast.parse((SOURCE / "__init__.py").read_text(encoding="utf-8"))
    found = {}
    for node in tree.body:
        if _is_type_checking_block(node):
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom)
                for alias in statement.names:
                    assert alias.asname == alias.name, "re-export as `X as X`"
                    found[alias.name] = "." * statement.level + str(statement.module)
    return found


def test_one_table_drives_all_lazy_loading_and_type_checking_imports():
    table = arrayfield._PUBLIC
    assert arrayfield.__all__ == sorted(table)
    checked = _type_checking_imports()
    eager = {"Field"}  # imported at runtime: no JAX behind it
    # ArrayModule: type checkers read _typing's declaration, the runtime _module's.
    assert checked.pop("ArrayModule") == "._typing"
    assert {**checked, "ArrayModule": table["ArrayModule"]} == {
        name: module for name, module in table.items() if name not in eager
    }
    for name, module in table.items():
        defined = importlib.import_module(module, "arrayfield")
        assert getattr(arrayfield, name) is getattr(defined, name), name
