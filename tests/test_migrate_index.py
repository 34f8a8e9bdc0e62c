"""The project-wide analysis of `arrayfield migrate`: bases resolved across
modules, diagnostics from how fields are used anywhere in the tree, `# noqa`.
Each test writes a small package and runs the CLI as a real subprocess, except
the last few, which check which files the index reads and how it finds them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from arrayfield.migrate import _runner
from helpers import python
from migrate_helpers import codes, migrate, write_tree


def run_in(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in `root`, with this checkout's arrayfield."""
    return python(*args, cwd=root, timeout=120)


def test_bases_resolve_through_imports_reexports_and_aliases(tmp_path):
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "from .core.base import Base as ProjectBase\n",
            "pkg/core/__init__.py": "",
            "pkg/core/base.py": "import equinox\n\nclass Base(equinox.Module):\n"
            "    pass\n",
            "pkg/a.py": "from pkg import ProjectBase\n\nclass A(ProjectBase):\n"
            "    x: float\n",
            "pkg/b.py": "from .core import base as b\n\nclass B(b.Base):\n"
            "    y: float\n",
            "pkg/c.py": "import pkg.core.base as cb\n\nclass C(cb.Base):\n"
            "    z: float\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/e.py": "from ..a import A\n\nclass E(A):\n    w: float\n",
            "pkg/f.py": "from . import a\n\nAlias = a.A\n\nclass F(Alias):\n"
            "    v: float\n\nclass G:\n    u: float\n",
            "pkg/h.py": "import equinox as eqx\n\nBase = eqx.Module\n\n"
            "class H(Base):\n    t: float\n",
        },
    )

    result = migrate(tmp_path, "--check", "pkg")

    assert codes(result) == [
        "pkg/a.py:4 AF001 A.x",
        "pkg/b.py:4 AF001 B.y",
        "pkg/c.py:4 AF001 C.z",
        "pkg/f.py:6 AF001 F.v",
        "pkg/h.py:6 AF001 H.t",
        "pkg/sub/e.py:4 AF001 E.w",
    ]
    assert result.returncode == 1  # core/base.py and h.py would change
    migrate(tmp_path, "pkg")
    assert "Base = af.ArrayModule\n" in (tmp_path / "pkg" / "h.py").read_text()
    assert (
        "class Base(af.ArrayModule):"
        in (tmp_path / "pkg" / "core" / "base.py").read_text()
    )


def test_field_uses_in_subclasses_elsewhere_decide_af001_and_af002(tmp_path):
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/model.py": """\
                import equinox as eqx
                import jax


                class Model(eqx.Module):
                    rate: float
                    threshold: float
                    steps: int
                    n_iter: int
                    grid: jax.Array
                    fft_size: jax.Array
                    flag: jax.Array
                    data: jax.Array
                """,
            "pkg/child.py": """\
                import jax.numpy as jnp

                from .model import Model


                class Child(Model):
                    def __call__(self, x):
                        if self.threshold > 0:
                            x = x.reshape(self.grid)
                        for _ in range(self.n_iter):
                            x = jnp.fft.fft2(x, s=self.fft_size)
                        return x if self.flag else x * self.data
                """,
            "pkg/fit.py": """\
                import equinox as eqx


                def advance(model):
                    return eqx.tree_at(lambda m: (m.steps, m.rate), model, (1, 2.0))
                """,
        },
    )

    result = migrate(tmp_path, "--check", "pkg")

    assert codes(result) == [
        "pkg/model.py:6 AF001 Model.rate",
        "pkg/model.py:8 AF001 Model.steps",
        "pkg/model.py:10 AF002 Model.grid",
        "pkg/model.py:11 AF002 Model.fft_size",
        "pkg/model.py:12 AF002 Model.flag",
    ]
    assert "replaced with eqx.tree_at at pkg/fit.py:5" in result.stdout
    assert 'Annotate it `steps: Int[Array, ""]`' in result.stdout
    assert "used as a shape or size at pkg/child.py:9" in result.stdout
    assert "used as a Python condition at pkg/child.py:12" in result.stdout


def test_fix_opts_shape_fields_out_of_conversion_in_every_spelling(tmp_path):
    write_tree(
        tmp_path,
        {
            "model.py": """\
                import equinox as eqx
                import jax
                import jax.numpy as jnp


                class Model(eqx.Module):
                    a: jax.Array
                    b: jax.Array = (2, 2)
                    c: jax.Array = eqx.field(default=(3, 3))
                    d: jax.Array = eqx.field(default=(4, 4), static=False)

                    def zeros(self):
                        return (
                            jnp.zeros(self.a),
                            jnp.ones(self.b),
                            jnp.empty(self.c),
                            jnp.full(self.d, 1.0),
                        )


                print([x.shape for x in Model((1, 1)).zeros()])
                """,
        },
    )

    result = migrate(tmp_path, "--fix", "model.py")

    assert (result.returncode, result.stdout) == (0, "")
    text = (tmp_path / "model.py").read_text()
    assert "    a: jax.Array = af.field(convert=False)\n" in text
    assert "    b: jax.Array = af.field(default=(2, 2), convert=False)\n" in text
    assert "    c: jax.Array = af.field(default=(3, 3), convert=False)\n" in text
    assert (
        "    d: jax.Array = af.field(default=(4, 4), static=False, convert=False)\n"
        in text
    )
    run = run_in(tmp_path, "model.py")
    assert run.stdout == "[(1, 1), (2, 2), (3, 3), (4, 4)]\n", run.stderr
    assert migrate(tmp_path, "--check", "--fix", "model.py").returncode == 0


def test_noqa_silences_the_codes_it_names(tmp_path):
    write_tree(
        tmp_path,
        {
            "model.py": """\
                import equinox as eqx


                class Model(eqx.Module):
                    a: float  # noqa: AF001
                    b: float  # noqa
                    c: float  # noqa: AF002
                    d: float  # noqa:AF005,AF001
                    e: float
                """,
        },
    )
    result = migrate(tmp_path, "--check", "model.py")
    assert codes(result) == ["model.py:7 AF001 Model.c", "model.py:9 AF001 Model.e"]


def test_per_instance_values_are_reported_with_a_fix_per_kind(tmp_path):
    write_tree(
        tmp_path,
        {
            "model.py": """\
                import functools

                import equinox as eqx
                import jax


                class Opaque:
                    pass


                class Model(eqx.Module):
                    name: str
                    label: str
                    kind: str = "sersic"
                    fn: object
                    part: object
                    thing: object
                    tree_part: object
                    obj: Opaque

                    def __init__(self, name, obj):
                        self.name = name
                        self.label = f"source {name}"
                        self.fn = lambda x: x
                        self.part = functools.partial(max, 1)
                        self.thing = Opaque()
                        self.tree_part = jax.tree_util.Partial(max, 1)
                        self.obj = obj
                """,
        },
    )
    result = migrate(tmp_path, "--check", "model.py")
    assert codes(result) == [
        "model.py:12 AF005 Model.name",
        "model.py:13 AF005 Model.label",
        "model.py:15 AF005 Model.fn",
        "model.py:16 AF005 Model.part",
        "model.py:17 AF005 Model.thing",
        "model.py:19 AF005 Model.obj",
    ]
    assert "Use jax.tree_util.Partial" in result.stdout
    assert "module level" in result.stdout


def test_dynamic_module_classes_are_migrated_and_reported_when_made_per_call(
    tmp_path,
):
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/base.py": "import equinox as eqx\n\nclass Base(eqx.Module):\n"
            "    pass\n",
            "pkg/make.py": """\
                import functools

                import equinox as eqx

                from .base import Base

                Top = type("Top", (eqx.Module,), {})


                def per_call(names):
                    return type("PerCall", (Base,), {"__annotations__": names})


                @functools.cache
                def cached(names):
                    return type("Cached", (eqx.Module,), {})
                """,
        },
    )
    result = migrate(tmp_path, "--check", "pkg")
    assert codes(result) == ['pkg/make.py:11 AF006 "PerCall"']
    migrate(tmp_path, "pkg")
    text = (tmp_path / "pkg" / "make.py").read_text()
    assert 'Top = type("Top", (af.ArrayModule,), {})' in text
    assert 'return type("Cached", (af.ArrayModule,), {})' in text


def test_typed_wraps_subclasses_elsewhere_but_not_fields_fix_opts_out(tmp_path):
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/base.py": "import equinox as eqx\nimport jax\n\n\n"
            "class Base(eqx.Module):\n    w: jax.Array\n",
            "pkg/child.py": """\
                import jax
                import jax.numpy as jnp

                from .base import Base


                class Child(Base):
                    n: jax.Array
                    b: jax.Array = 0.5

                    def zeros(self):
                        return jnp.zeros(self.n)
                """,
        },
    )
    result = migrate(tmp_path, "--typed", "--fix", "pkg")
    assert result.returncode == 0, result.stderr
    assert "    w: af.Field[jax.Array]\n" in (tmp_path / "pkg/base.py").read_text()
    child = (tmp_path / "pkg/child.py").read_text()
    assert "    n: jax.Array = af.field(convert=False)\n" in child
    # A number that was a Python float under eqx.Module stays one (AF007's fix),
    # so nothing is wrapped for the type checker: it is not converted.
    assert "    b: jax.Array = af.field(default=0.5, convert=False)\n" in child
    assert migrate(tmp_path, "--check", "--typed", "--fix", "pkg").returncode == 0


TWO_SCRIPT_FOLDERS = {
    "scripts/models.py": """\
        import equinox as eqx
        import jax

        class Grid(eqx.Module):
            shape: jax.Array
        """,
    "scripts/use.py": """\
        import jax.numpy as jnp
        from models import Grid

        class Zeros(Grid):
            def make(self):
                return jnp.zeros(self.shape)
        """,
    "tools/models.py": """\
        import equinox as eqx
        import jax

        class Grid(eqx.Module):
            y: jax.Array
            gain: float
        """,
    "tools/use.py": """\
        from models import Grid

        class C(Grid):
            z: float
        """,
}


def test_same_module_name_under_two_roots_keeps_both_files(tmp_path):
    # Two unrelated `models.py`, each imported by a script next to it: each
    # import resolves under its own folder, whichever order the folders come in.
    write_tree(tmp_path, TWO_SCRIPT_FOLDERS)
    expected = [
        "scripts/models.py:5 AF002 Grid.shape",
        "tools/models.py:6 AF001 Grid.gain",
        "tools/use.py:4 AF001 C.z",
    ]

    alone = migrate(tmp_path, "--check", "scripts")
    both = migrate(tmp_path, "--check", "scripts", "tools")
    reversed_ = migrate(tmp_path, "--check", "tools", "scripts")

    assert codes(alone) == expected[:1]
    assert codes(both) == expected
    assert codes(reversed_) == expected


def test_namespace_package_under_src_resolves_absolute_imports(tmp_path):
    # src/acme/ has no __init__.py: a PEP 420 namespace package.
    write_tree(
        tmp_path,
        {
            "src/acme/models/__init__.py": "",
            "src/acme/models/base.py": TWO_SCRIPT_FOLDERS["scripts/models.py"],
            "src/acme/models/use.py": TWO_SCRIPT_FOLDERS["scripts/use.py"].replace(
                "from models import", "from acme.models.base import"
            ),
        },
    )

    result = migrate(tmp_path, "--check", "src")

    assert codes(result) == ["src/acme/models/base.py:5 AF002 Grid.shape"]


def test_shape_ndim_len_and_is_none_are_no_shape_or_condition_use(tmp_path):
    write_tree(
        tmp_path,
        {
            "lin.py": """\
                from typing import Optional

                import equinox as eqx
                import jax
                import jax.numpy as jnp


                class Linear(eqx.Module):
                    weight: jax.Array
                    bias: Optional[jax.Array]
                    kernel: jax.Array
                    steps: jax.Array

                    def __call__(self, x):
                        if self.weight.ndim != 2 or self.weight.dtype == jnp.int32:
                            raise ValueError("bad weight")
                        y = self.weight @ x[: self.kernel.shape[1]]
                        if self.bias is not None:
                            y = y + self.bias
                        for _ in range(len(self.kernel)):
                            y = y + jnp.zeros(self.kernel.shape[0])
                        return y[: self.steps + 1]
                """,
        },
    )
    result = migrate(tmp_path, "--check", "lin.py")
    assert codes(result) == ["lin.py:12 AF002 Linear.steps"]
    assert migrate(tmp_path, "--fix", "lin.py").returncode == 0
    text = (tmp_path / "lin.py").read_text()
    assert "    weight: jax.Array\n    bias: Optional[jax.Array]\n" in text
    assert "    kernel: jax.Array\n" in text
    assert "    steps: jax.Array = af.field(convert=False)\n" in text


def test_noqa_af002_also_stops_the_fix_edit(tmp_path):
    write_tree(
        tmp_path,
        {
            "model.py": """\
                import equinox as eqx
                import jax
                import jax.numpy as jnp


                class Model(eqx.Module):
                    n: jax.Array  # noqa: AF002
                    m: jax.Array

                    def zeros(self):
                        return jnp.zeros(self.n), jnp.zeros(self.m)
                """,
        },
    )
    result = migrate(tmp_path, "--fix", "model.py")
    assert (result.returncode, result.stdout) == (0, "")
    text = (tmp_path / "model.py").read_text()
    assert "    n: jax.Array  # noqa: AF002\n" in text
    assert "    m: jax.Array = af.field(convert=False)\n" in text


def test_noqa_is_found_on_its_line_after_a_form_feed(tmp_path):
    # A form feed is part of a line to Python (str.splitlines would break there
    # and put every later noqa one line off).
    source = (
        "import equinox as eqx\nimport jax\nimport jax.numpy as jnp\n\x0c\n\n"
        "class Model(eqx.Module):\n"
        "    n: jax.Array  # noqa: AF002\n"
        "    m: jax.Array\n\n"
        "    def zeros(self):\n"
        "        return jnp.zeros(self.n), jnp.zeros(self.m)\n"
    )
    (tmp_path / "model.py").write_text(source)
    result = migrate(tmp_path, "--fix", "model.py")
    assert (result.returncode, result.stdout) == (0, "")
    text = (tmp_path / "model.py").read_text()
    assert "    n: jax.Array  # noqa: AF002\n" in text
    assert "    m: jax.Array = af.field(convert=False)\n" in text


def test_fix_keeps_the_arguments_of_a_dataclasses_field(tmp_path):
    write_tree(
        tmp_path,
        {
            "grid.py": """\
                import dataclasses

                import equinox as eqx
                import jax
                import jax.numpy as jnp


                class Grid(eqx.Module):
                    shape: jax.Array = dataclasses.field(default=(4, 4))
                    data: jax.Array = dataclasses.field(
                        default_factory=lambda: jnp.zeros(2)
                    )

                    def make(self):
                        return jnp.zeros(self.shape)


                print(eqx.filter_jit(Grid.make)(Grid()).shape)
                """,
        },
    )
    result = migrate(tmp_path, "--fix", "grid.py")
    assert (result.returncode, result.stdout) == (0, "")
    text = (tmp_path / "grid.py").read_text()
    assert "    shape: jax.Array = af.field(default=(4, 4), convert=False)\n" in text
    assert "    data: jax.Array = dataclasses.field(\n" in text
    run = run_in(tmp_path, "grid.py")
    assert run.stdout == "(4, 4)\n", run.stderr


def test_equinox_module_imported_through_a_project_module(tmp_path):
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/core.py": """\
                from equinox import Module
                import jax


                class Base(Module):
                    x: jax.Array
                """,
            "pkg/other.py": """\
                import jax
                from .core import Module, Base
                from . import core


                class Other(Module):
                    y: jax.Array


                class Dotted(core.Module):
                    w: jax.Array


                class Derived(Base):
                    z: jax.Array


                Alias = Module


                class Aliased(Alias):
                    v: jax.Array
                """,
            "check.py": """\
                import jax
                from pkg.other import Aliased, Derived, Dotted, Other

                print(
                    isinstance(Other(y=0).y, jax.Array),
                    isinstance(Dotted(w=0).w, jax.Array),
                    isinstance(Derived(x=1, z=2).z, jax.Array),
                    isinstance(Aliased(v=3).v, jax.Array),
                )
                """,
        },
    )
    result = migrate(tmp_path, "--typed", "pkg")
    assert (result.returncode, result.stdout) == (0, ""), result.stderr
    core = (tmp_path / "pkg/core.py").read_text()
    assert "from equinox import Module\n" in core  # pkg/other.py imports it
    other = (tmp_path / "pkg/other.py").read_text()
    assert "class Other(af.ArrayModule):\n    y: af.Field[jax.Array]\n" in other
    assert "class Dotted(af.ArrayModule):\n    w: af.Field[jax.Array]\n" in other
    assert "Alias = af.ArrayModule\n\n\nclass Aliased(Alias):\n" in other
    assert "    v: af.Field[jax.Array]\n" in other
    run = run_in(tmp_path, "check.py")
    assert run.stdout == "True True True True\n", run.stderr
    assert migrate(tmp_path, "--check", "--typed", "pkg").returncode == 0


def test_named_tuples_and_enums_compare_by_value_and_are_not_af005(tmp_path):
    write_tree(
        tmp_path,
        {
            "cfg.py": """\
                import enum
                from typing import NamedTuple


                class Shape(NamedTuple):
                    h: int
                    w: int


                class Pair(tuple):
                    pass


                class Mode(enum.Enum):
                    TRAIN = "train"


                class Level(enum.IntEnum):
                    LOW = 1


                class SubMode(Shape):
                    pass


                class Opaque:
                    pass
                """,
            "model.py": """\
                import equinox as eqx
                import jax
                from cfg import Level, Mode, Opaque, Pair, Shape, SubMode


                class Net(eqx.Module):
                    w: jax.Array
                    size: Shape
                    pair: Pair
                    mode: Mode
                    level: Level
                    sub: SubMode
                    other: Opaque

                    def __init__(self, h, w, mode):
                        self.w = jax.numpy.ones((h, w))
                        self.size = Shape(h, w)
                        self.pair = Pair((h, w))
                        self.mode = Mode(mode)
                        self.level = Level(1)
                        self.sub = SubMode(h, w)
                        self.other = Opaque()
                """,
        },
    )
    result = migrate(tmp_path, "--check", ".")
    assert codes(result) == ["model.py:13 AF005 Net.other"]


def test_subscripted_generic_bases_are_followed(tmp_path):
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/gen.py": """\
                from typing import Generic, TypeVar

                import equinox as eqx
                import jax
                import jax.numpy as jnp

                T = TypeVar("T")


                class Parent(eqx.Module, Generic[T]):
                    shape: jax.Array
                    meta: T


                class Near(Parent[int]):
                    scale: jax.Array = eqx.field(converter=jnp.asarray)
                """,
            "pkg/child.py": """\
                import jax.numpy as jnp

                from .gen import Parent


                class Child(Parent[int]):
                    def make(self):
                        return jnp.zeros(self.shape)
                """,
        },
    )
    result = migrate(tmp_path, "--check", "pkg")
    assert codes(result) == ["pkg/gen.py:11 AF002 Parent.shape"]
    assert migrate(tmp_path, "--fix", "pkg").returncode == 0
    text = (tmp_path / "pkg/gen.py").read_text()
    assert "    shape: jax.Array = af.field(convert=False)\n" in text
    assert "class Near(Parent[int]):\n    scale: af.Field[jax.Array]\n" in text


def test_files_are_read_when_they_name_a_module_class_as_a_whole_word(tmp_path):
    """A file that imports no equinox is indexed when it names a Module class
    found elsewhere (its subclass may be there), and only then: the names are
    searched as whole words, a name that begins another (`Part`, `Parts`),
    with non-ASCII letters first or last, at the start and end of the file,
    and a nested class's name after an outer one's alias."""
    module_classes = ["Part", "Parts", "Ünit", "Base", "Basé"]
    files = {
        "pkg/base.py": "import equinox as eqx\n\n"
        + "".join(f"class {name}(eqx.Module):\n    pass\n" for name in module_classes)
        + "class Outer:\n    class Inner(eqx.Module):\n        pass\n",
        "pkg/first.py": "Part",  # the whole file
        "pkg/second.py": "x = Parts\n",
        "pkg/third.py": "from .base import Ünit\n",
        "pkg/fourth.py": "y = (Base)",
        "pkg/fifth.py": "from .base import Outer as MyOuter\nz = MyOuter.Inner\n",
        "pkg/sixth.py": "w = [Basé]\n",
        "pkg/not_1.py": "MyBase = 1\nBase_ = 2\nPartsX = 3\nPar = 4\n",
        "pkg/not_2.py": "Ünits = 'Bases'\nxÜnit = 0\nBaséß = 1\néBase = 2\n",
        "pkg/not_3.py": "import math\n",
    }
    write_tree(tmp_path, files)
    contents = {
        tmp_path / name: (tmp_path / name).read_bytes() for name in sorted(files)
    }
    index, errors = _runner.index_project(contents)
    assert not errors
    indexed = {Path(name).name for name in index.files}
    assert indexed == {
        "base.py",
        *("first.py", "second.py", "third.py", "fourth.py", "fifth.py", "sixth.py"),
    }


class _CountedUses(dict):
    """A class's `uses` table that counts how often it is read."""

    reads = 0

    def items(self):  # type: ignore[override]
        _CountedUses.reads += 1
        return super().items()


def _chain(count: int) -> str:
    """A generated file: each Module class subclasses the one before it."""
    lines = ["import equinox as eqx\n"]
    for n in range(count):
        base = f"Layer{n - 1}" if n else "eqx.Module"
        lines.append(
            f"\n\nclass Layer{n}({base}):\n    x{n}: float\n\n"
            f"    def size(self):\n        return len(range(self.x{n}))\n"
        )
    return "".join(lines)


def test_a_deep_hierarchy_reads_each_class_once_not_once_per_ancestor(tmp_path):
    """Issue 30: what a class's subclasses do with its fields was gathered
    afresh for every class, the square of the depth on a generated chain."""
    reads = []
    for count in (50, 100):
        path = tmp_path / f"chain{count}.py"
        path.write_text(_chain(count))
        contents, _ = _runner.read_files([path])
        index, errors = _runner.index_project(contents)
        assert errors == []
        for cls in index.files[str(path)].classes.values():
            object.__setattr__(cls, "uses", _CountedUses(cls.uses))
        _CountedUses.reads = 0
        context = index.context(str(path))
        assert len(context.classes) == count
        # Every class still sees its descendants' uses.
        assert set(context.classes["Layer0"].uses) == {f"x{n}" for n in range(count)}
        reads.append(_CountedUses.reads)
    assert reads == [50, 100]


@pytest.mark.parametrize("initials", [2, 20])
def test_the_name_search_finds_whole_names_with_few_or_many_initials(initials):
    """Phase 1 finds the files that mention a Module class by name: one regex
    per initial when there are few (a literal start is searched at memchr
    speed), one for all when there are many; either way a name counts only
    as a whole identifier."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:initials]
    names = sorted({f"{letter}art{n}" for letter in letters for n in range(3)})
    names.append("Éclair")
    patterns = _runner._name_patterns(sorted(names))
    assert len(patterns) == (initials + 1 if initials + 1 <= 8 else 1)

    def mentions(text: str) -> bool:
        data = text.encode()
        return any(_runner._mentions(pattern, data) for pattern in patterns)

    last = names[-2]  # the last ASCII name
    assert mentions(f"x = {last}()\n")
    assert mentions("from .parts import Aart0 as Base\n")
    assert mentions("y = models.Éclair\n")
    assert not mentions(f"x = {last}9()\n")  # a longer name
    assert not mentions(f"x = My{last}()\n")  # inside a name
    assert not mentions("x = ÀAart0\n")  # after a non-ASCII letter
    assert not mentions("x = Aart\n")  # a prefix of the names


def test_a_hierarchy_deeper_than_fifty_classes_is_read_to_its_root(tmp_path):
    """What a class inherits (here: an `__init__` at the root, so its fields
    need not come from constructor arguments) is read up the whole chain of
    bases; the walks used to stop at depth 50 and guess."""
    diagnostics = []
    for depth in (2, 60):
        lines = [
            "import equinox as eqx\n\n\nclass Layer0(eqx.Module):\n"
            "    def __init__(self):\n        pass\n"
        ]
        lines += [
            f"\n\nclass Layer{n}(Layer{n - 1}):\n    pass\n" for n in range(1, depth)
        ]
        lines.append(f"\n\nclass Leaf(Layer{depth - 1}):\n    rate: float\n")
        path = tmp_path / f"chain{depth}.py"
        path.write_text("".join(lines))
        result = migrate(tmp_path, "--check", path.name)
        found = [
            line.split(": ", 1)[1]
            for line in result.stdout.splitlines()
            if " AF" in line
        ]
        assert len(found) == 1, result.stdout
        diagnostics.append(found[0].replace(f"chain{depth}", "chain"))
    assert diagnostics[0] == diagnostics[1]


def test_star_imports_are_followed_to_the_module_that_defines_the_base(tmp_path):
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "from .reexport import *\n",
            "pkg/reexport.py": "from .core import *\n",
            "pkg/core.py": "import equinox as eqx\n\nclass Core(eqx.Module):\n"
            "    width: float\n\nclass _Hidden(eqx.Module):\n    pass\n",
            "model.py": "from pkg import Core\n\nclass Other(Core):\n"
            "    height: float\n",
        },
    )
    assert codes(migrate(tmp_path, "--check", ".")) == [
        "model.py:4 AF001 Other.height",
        "pkg/core.py:4 AF001 Core.width",
    ]


@pytest.mark.parametrize(
    ("dynamic", "line"),
    [
        ("globals().update({k: getattr(_m, k) for k in _m.__all__})", 3),
        ("for _k in _m.__all__:\n    globals()[_k] = getattr(_m, _k)", 4),
        ("import sys\nsetattr(sys.modules[__name__], 'Base', _m.Base)", 4),
        ("def __getattr__(name):\n    return getattr(_m, name)", 3),
        ("__getattr__, __dir__, __all__ = lazy.attach(__name__, ['base'])", 3),
    ],
)
def test_a_base_re_exported_at_run_time_is_said_not_to_be_known(
    tmp_path, dynamic, line
):
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": f"from . import base as _m\n\n{dynamic}\n",
            "pkg/base.py": "import equinox as eqx\n\n__all__ = ['Base']\n\n"
            "class Base(eqx.Module):\n    scale: float = 1.0\n",
            "model.py": "from pkg import Base\n\nclass Model(Base):\n"
            "    offset: float\n\nclass Twice(Base):\n    more: float\n",
        },
    )
    result = migrate(tmp_path, "--check", ".")
    # Once per file and base, at the first class that uses it, naming the line.
    assert codes(result) == [
        "model.py:3 AF009 Base",
        "pkg/base.py:6 AF001 Base.scale",
    ]
    assert f"re-exported dynamically at pkg/__init__.py:{line}" in result.stdout
    assert "cannot tell whether 'Base' derives from eqx.Module" in result.stdout


def test_a_base_no_module_binds_is_said_not_to_be_known(tmp_path):
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/base.py": "import equinox as eqx\n\nclass Base(eqx.Module):\n"
            "    pass\n",
            "model.py": "from pkg import Base\n\nclass Model(Base):\n"
            "    offset: float\n",
        },
    )
    result = migrate(tmp_path, "--check", ".")
    assert codes(result) == ["model.py:3 AF009 Base"]
    assert "pkg/__init__.py does not bind it where migrate can read" in result.stdout
