"""Golden-file tests for the codemod behind `arrayfield migrate`.

Each case in tests/migrate_golden/ is `<case>_in.py` (input), `<case>_out.py`
(the expected result, byte for byte) and, when the input needs a human
decision, `<case>_diag.txt` (expected diagnostics as `line:col: CODE message`).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from arrayfield.migrate._splice import migrate_source
from helpers import run_code

GOLDEN = Path(__file__).parent / "migrate_golden"
CASES = sorted(path.name.removesuffix("_in.py") for path in GOLDEN.glob("*_in.py"))
SRC = Path(__file__).parents[1] / "src"


def _read(case: str, suffix: str) -> str:
    path = GOLDEN / f"{case}{suffix}"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def test_every_golden_input_has_an_expected_output():
    assert len(CASES) >= 20
    missing = [case for case in CASES if not (GOLDEN / f"{case}_out.py").exists()]
    assert missing == []


@pytest.mark.parametrize("case", CASES)
def test_migration_matches_golden_output(case):
    result = migrate_source(_read(case, "_in.py"))
    assert result.code == _read(case, "_out.py")


@pytest.mark.parametrize("case", CASES)
def test_diagnostics_match_golden_report(case):
    result = migrate_source(_read(case, "_in.py"))
    report = "".join(
        f"{d.line}:{d.col}: {d.code} {d.message}\n" for d in result.diagnostics
    )
    assert report == _read(case, "_diag.txt")


@pytest.mark.parametrize("case", CASES)
def test_migrating_a_migrated_file_changes_nothing(case):
    expected = _read(case, "_out.py")
    result = migrate_source(expected)
    assert not result.changed
    assert result.code == expected


@pytest.mark.parametrize("case", CASES)
def test_golden_output_is_valid_python(case):
    compile(_read(case, "_out.py"), f"{case}_out.py", "exec")


@pytest.mark.parametrize("case", ["type_checking_import", "local_import"])
def test_migrated_file_with_a_non_module_level_arrayfield_import_runs(case):
    # `import arrayfield as af` under `if TYPE_CHECKING:` or in a function is not
    # bound when the class statement runs, so it must not be reused.
    code = compile(_read(case, "_out.py"), f"{case}_out.py", "exec")
    exec(code, {"__name__": f"golden_{case}"})


def test_af_bound_to_something_else_in_any_scope_is_left_alone():
    source = (
        "import equinox as eqx\nimport jax\n\n\n"
        "def make():\n"
        "    af = 0.5\n\n"
        "    class Local(eqx.Module):\n"
        "        x: jax.Array\n\n"
        "    return Local, af\n"
    )
    result = migrate_source(source)
    assert result.code.startswith("import arrayfield\nimport jax\n")
    assert "    class Local(arrayfield.ArrayModule):\n" in result.code


def test_diagnostics_name_nested_classes_as_runtime_errors_do():
    # Like arrayfield's own errors: the __qualname__ without a function's
    # `<locals>` part.
    source = (
        "import equinox as eqx\n\n\n"
        "class Scene(eqx.Module):\n"
        "    class Config(eqx.Module):\n"
        "        lr: float\n\n\n"
        "class Holder:\n"
        "    class Camera(eqx.Module):\n"
        "        exposure: float\n\n\n"
        "def make():\n"
        "    class Local(eqx.Module):\n"
        "        rate: float\n\n"
        "    return Local\n"
    )
    names = [d.message.split("'")[1] for d in migrate_source(source).diagnostics]
    assert names == ["Scene.Config.lr", "Holder.Camera.exposure", "Local.rate"]


@pytest.mark.parametrize(
    "helper",
    [
        "class Helper:\n    def __init__(self):\n        self.x = 1.0\n",
        "if True:\n    class Helper:\n        def __init__(self):\n"
        "            self.x = 1.0\n",
    ],
)
def test_a_class_defined_in_a_method_assigns_its_own_self(helper):
    # Its `self.x = 1.0` is not the Module's, at any depth of the method.
    source = (
        "import equinox as eqx\nimport jax\nimport jax.numpy as jnp\n\n\n"
        "class A(eqx.Module):\n"
        "    x: jax.Array\n\n"
        "    def __init__(self):\n"
        "        self.x = jnp.zeros(3)\n"
    ) + "".join(f"        {line}\n" for line in helper.splitlines())
    assert migrate_source(source).diagnostics == ()


@pytest.mark.parametrize(
    "converter",
    [
        "jnp.asarray",
        "jnp.array",
        "np.asarray",
        "functools.partial(jnp.asarray, dtype=jnp.float32)",
    ],
)
def test_float_field_with_an_array_converter_is_not_reported(converter):
    # The converter already stores an array, so new values do not recompile.
    field = f"rate: float = eqx.field(converter={converter})"
    source = (
        "import functools\n\nimport equinox as eqx\nimport jax.numpy as jnp\n"
        f"import numpy as np\n\n\nclass A(eqx.Module):\n    {field}\n"
    )
    result = migrate_source(source)
    assert result.diagnostics == ()
    assert f"    {field}\n" in result.code


def test_float_field_with_a_non_array_converter_is_still_reported():
    source = (
        "import equinox as eqx\n\n\n"
        "class A(eqx.Module):\n"
        "    rate: float = eqx.field(converter=float)\n"
    )
    assert [d.code for d in migrate_source(source).diagnostics] == ["AF001"]


def test_file_without_equinox_modules_is_returned_unchanged():
    source = "import jax\n\n\nclass A:\n    x: jax.Array\n"
    result = migrate_source(source)
    assert not result.changed
    assert result.diagnostics == ()


def test_windows_line_endings_survive():
    source = (
        "import equinox as eqx\r\nimport jax\r\n\r\n\r\n"
        "class A(eqx.Module):\r\n    x: jax.Array\r\n"
    )
    result = migrate_source(source.encode())
    assert result.code == (
        "import arrayfield as af\r\nimport jax\r\n\r\n\r\n"
        "class A(af.ArrayModule):\r\n    x: jax.Array\r\n"
    )


def test_declared_source_encoding_is_kept():
    source = (
        "# -*- coding: latin-1 -*-\n"
        "import equinox as eqx\n"
        "import jax\n\n\n"
        "class Détecteur(eqx.Module):\n"
        "    gain: jax.Array\n"
    ).encode("latin-1")
    result = migrate_source(source)
    assert "class Détecteur(af.ArrayModule):" in result.code
    assert result.code.encode(result.encoding).startswith(
        b"# -*- coding: latin-1 -*-\nimport arrayfield as af\n"
    )
    assert "class D\xe9tecteur".encode("latin-1") in result.code.encode(result.encoding)


def test_converter_is_kept_on_static_array_field():
    # arrayfield leaves static fields alone, so the converter still does work.
    source = (
        "import equinox as eqx\nimport jax\nimport jax.numpy as jnp\n\n\n"
        "class A(eqx.Module):\n"
        "    x: jax.Array = eqx.field(static=True, converter=jnp.asarray)\n"
    )
    result = migrate_source(source)
    assert "x: jax.Array = eqx.field(static=True, converter=jnp.asarray)" in (
        result.code
    )
    assert [d.code for d in result.diagnostics] == ["AF003"]


def test_unparsable_source_raises_syntax_error():
    with pytest.raises(SyntaxError):
        migrate_source("class A(eqx.Module:\n")


def test_migrate_package_imports_neither_jax_nor_equinox():
    # Stand in for the `arrayfield` package so its JAX-importing __init__ does
    # not run: what is checked is the migrate subpackage alone.
    script = f"""
import sys, types
package = types.ModuleType("arrayfield")
package.__path__ = [{str(SRC / "arrayfield")!r}]
sys.modules["arrayfield"] = package
import arrayfield.migrate
import arrayfield.migrate._cli
import arrayfield.migrate._splice
result = arrayfield.migrate._splice.migrate_source(
    "import equinox as eqx\\nclass A(eqx.Module):\\n    pass\\n"
)
assert result.changed
heavy = sorted(name for name in ("jax", "equinox", "jaxtyping") if name in sys.modules)
print(heavy)
"""
    completed = run_code(script, check=True)
    assert completed.stdout.strip() == "[]"


# (annotation, value to store, kind the codemod reports: "jax", "numpy" or None)
ANNOTATION_KINDS = [
    ("jax.Array", 1.0, "jax"),
    ("jnp.ndarray", 1.0, "jax"),
    ("ArrayLike", 1.0, None),  # names Python numbers: they stay as they are
    ("Float[ArrayLike, '']", 1.0, None),
    ("Float[Array, '']", 1.0, "jax"),
    ("Int32[Array, '']", 3, "jax"),
    ("Bool[Array, '']", True, "jax"),
    ("Optional[jax.Array]", 1.0, "jax"),
    ("Union[jax.Array, float]", 1.0, None),
    ("Annotated[jax.Array, 'unit']", 1.0, "jax"),
    ("'jax.Array'", 1.0, "jax"),
    ("np.ndarray", 1.0, "numpy"),
    ("Float[np.ndarray, '']", 1.0, "numpy"),
    ("float", 1.0, None),
    ("list", [1.0], None),
]


@pytest.mark.parametrize(("annotation", "value", "kind"), ANNOTATION_KINDS)
def test_codemod_reads_annotations_as_the_base_class_does(
    annotation, value, kind, tmp_path, monkeypatch
):
    import jax
    import numpy as np

    from arrayfield.migrate._annotations import array_kind
    from arrayfield.migrate._bindings import ImportMap

    header = (
        "from typing import Annotated, Optional, Union\n"
        "import jax\nimport jax.numpy as jnp\nimport numpy as np\n"
        "from jax.typing import ArrayLike\n"
        "from jaxtyping import Array, Bool, Float, Int32\n"
        "import arrayfield as af\n"
    )
    source = f"{header}\nclass M(af.ArrayModule):\n    x: {annotation}\n"
    parsed = ast.parse(annotation, mode="eval").body
    assert array_kind(parsed, ImportMap.from_ast(ast.parse(source))) == kind

    path = tmp_path / "annotation_kinds.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("annotation_kinds", path)
    assert spec is not None and spec.loader is not None
    sample = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "annotation_kinds", sample)
    spec.loader.exec_module(sample)
    stored = sample.M(value).x
    core_kind = (
        "jax"
        if isinstance(stored, jax.Array)
        else "numpy"
        if isinstance(stored, np.ndarray)
        else None
    )
    assert core_kind == kind


TYPED_INPUT = """\
import dataclasses

import equinox as eqx
import jax
import numpy as np


class Scene(eqx.Module):
    x: jax.Array
    legacy: np.array = np.zeros(2)
    shape: jax.Array = eqx.field(static=True)
    raw: jax.Array = eqx.field(default=None, converter=np.asarray)
    table: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(2))
    count: int = 0


class NotAModule:
    x: jax.Array = 0
"""

TYPED_OUTPUT = """\
import dataclasses

import arrayfield as af
import equinox as eqx
import jax
import numpy as np


class Scene(af.ArrayModule):
    x: af.Field[jax.Array]
    legacy: af.Field[np.ndarray] = af.field(default=np.zeros(2))
    shape: jax.Array = eqx.field(static=True)
    raw: af.Field[jax.Array] = eqx.field(default=None, converter=np.asarray)
    table: af.Field[np.ndarray] = dataclasses.field(default_factory=lambda: np.zeros(2))
    count: int = 0


class NotAModule:
    x: jax.Array = 0
"""


def test_typed_wraps_converted_array_fields_and_their_bare_defaults():
    result = migrate_source(TYPED_INPUT, typed=True)
    assert result.code == TYPED_OUTPUT
    assert not migrate_source(TYPED_OUTPUT, typed=True).changed


def test_typed_leaves_opted_out_fields_and_reuses_imports():
    source = (
        "import arrayfield as af\n"
        "import jax\n\n\n"
        "class Scene(af.ArrayModule):\n"
        "    x: jax.Array\n"
        "    shape: jax.Array = af.field(convert=False)\n"
    )
    expected = source.replace("x: jax.Array", "x: af.Field[jax.Array]")
    assert migrate_source(source, typed=True).code == expected
    assert not migrate_source(source).changed  # without --typed: nothing to do


def test_wrapping_with_arrayfield_imported_by_name_adds_the_module():
    source = (
        "import equinox as eqx\n"
        "import jax.numpy as jnp\n"
        "from arrayfield import ArrayModule\n"
        "from jax import Array\n\n\n"
        "class Scene(eqx.Module):\n"
        "    x: Array = eqx.field(converter=jnp.asarray)\n"
    )
    code = migrate_source(source).code
    assert "import arrayfield as af\n" in code
    assert "class Scene(ArrayModule):\n    x: af.Field[Array]\n" in code


def test_wrapping_when_af_is_taken_spells_arrayfield():
    source = (
        "import equinox as eqx\n"
        "import jax.numpy as jnp\n"
        "from jax import Array\n\n"
        "af = 1\n\n\n"
        "class Scene(eqx.Module):\n"
        "    x: Array = eqx.field(converter=jnp.asarray)\n"
    )
    code = migrate_source(source).code
    assert "x: arrayfield.Field[Array]\n" in code and "import arrayfield\n" in code


def test_typed_reads_legacy_array_functions_as_ndarray_inside_and_in_strings():
    source = (
        "from typing import Optional\n\n"
        "import equinox as eqx\n"
        "import jax.numpy as jnp\n"
        "import numpy as np\n\n\n"
        "class Old(eqx.Module):\n"
        '    b: "jnp.array"\n'
        "    c: Optional[np.array] = None\n"
        "    d: 'Optional[np.array]' = None\n"
    )
    result = migrate_source(source, typed=True)
    assert '    b: af.Field["jnp.ndarray"]\n' in result.code
    assert "    c: af.Field[Optional[np.ndarray]] = af.field(default=None)\n" in (
        result.code
    )
    assert "    d: af.Field['Optional[np.ndarray]'] = af.field(default=None)\n" in (
        result.code
    )
    assert not migrate_source(result.code, typed=True).changed


def test_comments_of_a_field_call_dropped_on_a_one_line_class_body_stay_there():
    source = (
        "import equinox as eqx\n"
        "import jax\n"
        "import jax.numpy as jnp\n\n\n"
        "class A(eqx.Module): x: jax.Array = eqx.field(  # grid\n"
        "    converter=jnp.asarray)\n\n\n"
        "y = 1\n"
    )
    code = migrate_source(source).code
    assert "class A(af.ArrayModule): x: af.Field[jax.Array]  # grid\n\n\ny = 1\n" in (
        code
    )
