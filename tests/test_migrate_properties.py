"""Two properties of `arrayfield migrate`'s rewrite, over every golden input,
the skyfit project, every piece of Python the migrate tests write and
generated files (issue 36):

- `--fix` is idempotent: fixing a fixed file changes nothing;
- the output parses to the input's tree except at the planned edits. Both
  trees are read with `ast` and the edits the codemod may make are undone on
  both sides alike (a Module base, an `af.Field[...]` annotation, a field's
  `eqx.field`/`af.field` call reduced to its default, import statements); what
  is left must be equal, so any other change (a statement lost, an expression
  rewritten, a class renamed) fails.
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import given, note, settings

from arrayfield.migrate._splice import migrate_source

HERE = Path(__file__).parent
GOLDEN = sorted((HERE / "migrate_golden").glob("*_in.py"))
PROJECT = sorted((HERE / "migrate_project").rglob("*.py"))
INPUTS = [*GOLDEN, *PROJECT]
FLAGS = [{}, {"fix": True}, {"fix": True, "typed": True}]

# What a base, a field call and a typed annotation may be spelled as, before
# and after the rewrite (by the last name: `arrayfield.ArrayModule` where `af`
# is taken, a custom alias of equinox).
_MODULES = {"Module", "ArrayModule"}
_FIELD_CALLS = {"field"}


def _dotted(node: ast.AST) -> str:
    """The last name of `a.b.c` or `c`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


class _Undo(ast.NodeTransformer):
    """Each edit the codemod plans, undone to one spelling."""

    def __init__(self, tree: ast.Module):
        # Local names of equinox's Module (`from equinox import Module as M`).
        self.modules = set(_MODULES) | {
            alias.asname
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
            if alias.name == "Module" and alias.asname
        }

    def _module(self, node: ast.AST) -> ast.AST:
        return ast.Name("MODULE") if _dotted(node) in self.modules else node

    def visit_Import(self, node: ast.Import) -> None:
        return None  # imports are added and dropped as the edits need

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        return None

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.bases = [self._module(base) for base in node.bases]
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        # `type(name, (eqx.Module,), namespace)`: a base like a class's.
        if _dotted(node.func) == "type" and len(node.args) == 3:
            bases = node.args[1]
            if isinstance(bases, ast.Tuple):
                bases.elts = [self._module(base) for base in bases.elts]
        return self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        # `Base = eqx.Module` becomes `Base = af.ArrayModule`.
        node.value = self._module(node.value)
        return self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if _dotted(node.value) == "Field":  # `af.Field[X]` is X
            return self.visit(node.slice)
        return self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        value = node.value
        if isinstance(value, ast.Call) and _dotted(value.func) in _FIELD_CALLS:
            # A field's call keeps its default; its options (a converter
            # dropped, convert=False added) are the planned edits.
            defaults = [k.value for k in value.keywords if k.arg == "default"]
            node.value = defaults[0] if defaults else None
        # `jnp.array` as an annotation (a function) is written `jnp.ndarray`.
        for inner in ast.walk(node.annotation):
            if isinstance(inner, ast.Attribute) and inner.attr == "array":
                inner.attr = "ndarray"
            elif isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                inner.value = re.sub(r"\.array\b", ".ndarray", inner.value)
        return self.generic_visit(node)


def _undone(source: str) -> str:
    tree = ast.parse(source)
    return ast.dump(_Undo(tree).visit(tree))


def _check(source: str, **flags: bool) -> None:
    result = migrate_source(
        source, fix=flags.get("fix", False), typed=flags.get("typed", False)
    )
    assert _undone(result.code) == _undone(source)
    if flags.get("fix"):
        again = migrate_source(result.code, fix=True, typed=flags.get("typed", False))
        assert again.code == result.code


@pytest.mark.parametrize("flags", FLAGS, ids=["plain", "fix", "fix-typed"])
@pytest.mark.parametrize("path", INPUTS, ids=lambda p: str(p.relative_to(HERE)))
def test_inputs_keep_their_tree_and_fix_is_idempotent(path, flags):
    _check(path.read_text(encoding="utf-8"), **flags)


# Pieces of a class body: fields every way the codemod reads them.
_FIELDS = [
    "w: jax.Array",
    'b: Float[Array, "n"] = 0.5',
    "scale: float = 1.0",
    "n: int = eqx.field(static=True, default=3)",
    "x: jax.Array = eqx.field(converter=jnp.asarray)",
    "y: jax.Array = eqx.field(default=0.0)",
    "shape: jax.Array = (2, 3)",
    "name: str = 'a'",
    "eps: Float[Array, ''] = 1e-6  # a comment",
    "z: np.ndarray = eqx.field(converter=np.asarray, default=1)",
]
_METHODS = [
    "def __call__(self, v):\n    return v * self.w",
    "def size(self):\n    return jnp.zeros(self.shape)",
    "def bump(self):\n    return eqx.tree_at(lambda m: m.n, self, self.n + 1)",
    "def __init__(self, w):\n    self.w = w\n    self.shape = w.shape",
]
_HEAD = (
    "import equinox as eqx\nimport jax\nimport jax.numpy as jnp\n"
    "import numpy as np\nfrom jaxtyping import Array, Float\n"
)


# What the other fixtures leave out: columns after non-ASCII text, values whose
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
    # A default in parentheses.
    "parens.py": """\
import equinox as eqx
from jaxtyping import Array, Float


class Eps(eqx.Module):
    eps: Float[Array, ""] = (1e-5)
""",
}


def _repros() -> list[str]:
    """Every string of Python with a class in it that the migrate tests
    write (`tests/test_migrate*.py`), dicts of `name.py: source` included."""
    found: list[str] = list(EDGES.values())
    for path in sorted(HERE.glob("test_migrate*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = textwrap.dedent(node.value)
                if "class " not in text:
                    continue
                try:
                    ast.parse(text)
                except SyntaxError:
                    continue
                found.append(text)
    return found


REPROS = _repros()


def test_the_repros_are_found():
    assert len(REPROS) >= 80


@pytest.mark.parametrize("flags", FLAGS, ids=["plain", "fix", "fix-typed"])
def test_repros_keep_their_tree_and_fix_is_idempotent(flags):
    for source in REPROS:
        try:
            _check(source, **flags)
        except AssertionError as error:
            raise AssertionError(source) from error


@st.composite
def _modules(draw: st.DrawFn) -> str:
    parts = [_HEAD]
    for n in range(draw(st.integers(1, 3))):
        base = draw(
            st.sampled_from(["eqx.Module", f"Layer{n - 1}" if n else "eqx.Module"])
        )
        fields = draw(
            st.lists(st.sampled_from(_FIELDS), min_size=1, max_size=4, unique=True)
        )
        methods = draw(st.lists(st.sampled_from(_METHODS), max_size=2, unique=True))
        body = "\n".join([*fields, *methods])
        parts.append(f"\n\nclass Layer{n}({base}):\n{textwrap.indent(body, '    ')}\n")
    return "".join(parts)


@settings(max_examples=60, deadline=None)
@given(_modules(), st.sampled_from(FLAGS))
def test_generated_files_keep_their_tree_and_fix_is_idempotent(source, flags):
    note(source)
    _check(source, **flags)
