"""The writer (`_splice`): the plan's edits put into the file's text at `ast`
positions, every other byte kept, in any layout: parentheses, several
statements on a line, imports inside functions and blocks, a byte order mark,
names Python folds to NFKC. Whatever the layout, the output must parse to the
input's tree except at the planned edits (`test_migrate_properties._check`).
"""

from __future__ import annotations

import ast
import itertools
import textwrap
from pathlib import Path

import pytest

from arrayfield.migrate import _runner
from arrayfield.migrate._splice import migrate_source
from test_migrate_properties import _check


def test_the_field_statements_keep_their_comments_and_indentation():
    source = textwrap.dedent(
        """\
        import equinox as eqx
        import jax.numpy as jnp
        from jaxtyping import Array, Float


        def make():
            class Local(eqx.Module):
                # above
                x: Float[Array, ""] = eqx.field(converter=jnp.asarray)  # x
                z: Float[Array, ""] = eqx.field(converter=jnp.asarray  # inside
                )
                y: Float[Array, ""] = eqx.field(
                    static=False,
                    converter=jnp.asarray,  # kept
                )

            return Local
        """
    )
    spliced = migrate_source(source).code
    assert '        x: af.Field[Float[Array, ""]]  # x\n' in spliced
    # A comment inside a call dropped whole goes above the statement, indented.
    assert '        # inside\n        z: af.Field[Float[Array, ""]]\n' in spliced
    assert "            static=False,  # kept\n        )\n" in spliced
    assert "converter" not in spliced


def test_annotations_and_defaults_are_wrapped_in_place():
    source = textwrap.dedent(
        """\
        \"\"\"Doc.\"\"\"
        import equinox as eqx
        import numpy as np
        from jaxtyping import Array, Float


        class A(eqx.Module):
            w: Float[Array, "n"]
            eps: Float[Array, ""] = 1e-5  # a constant
            legacy: np.array
        """
    )
    spliced = migrate_source(source, typed=True).code
    assert '    w: af.Field[Float[Array, "n"]]\n' in spliced
    assert (
        '    eps: af.Field[Float[Array, ""]] = af.field(default=1e-5)  # a' in spliced
    )
    assert "    legacy: af.Field[np.ndarray]\n" in spliced  # a type, not a function
    assert spliced.startswith('"""Doc."""\nimport arrayfield as af\nimport numpy')


HEAD = "import equinox as eqx\nimport jax\n\n\n"
NEW_HEAD = "import arrayfield as af\nimport jax\n\n\n"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # The base in parentheses: they stay.
        (
            HEAD + "class A((eqx.Module)):\n    x: jax.Array\n",
            NEW_HEAD + "class A((af.ArrayModule)):\n    x: jax.Array\n",
        ),
        # Another statement on the field's line.
        (
            HEAD + "class A(eqx.Module):\n    x: jax.Array = eqx.field("
            "converter=jax.numpy.asarray); y: int = 1\n",
            NEW_HEAD + "class A(af.ArrayModule):\n    x: af.Field[jax.Array]; "
            "y: int = 1\n",
        ),
        # `eqx` is left only in a comment: no use, so its import goes.
        (
            HEAD + "class A(eqx.Module):  # was an eqx.Module\n    x: jax.Array\n",
            NEW_HEAD + "class A(af.ArrayModule):  # was an eqx.Module\n"
            "    x: jax.Array\n",
        ),
        # The import to drop is inside a function.
        (
            "import jax\n\n\ndef make():\n    import equinox as eqx\n\n"
            "    class A(eqx.Module):\n        x: jax.Array\n\n    return A\n",
            "import arrayfield as af\nimport jax\n\n\ndef make():\n\n"
            "    class A(af.ArrayModule):\n        x: jax.Array\n\n    return A\n",
        ),
        # `af` is a name already: arrayfield is imported under its own name.
        (
            HEAD + "af = 1\n\n\nclass A(eqx.Module):\n    x: jax.Array\n",
            "import arrayfield\nimport jax\n\n\naf = 1\n\n\n"
            "class A(arrayfield.ArrayModule):\n    x: jax.Array\n",
        ),
        # A base in a `type(...)` call.
        (
            HEAD + "A = type('A', (eqx.Module,), {'__annotations__': {}})\n",
            NEW_HEAD + "A = type('A', (af.ArrayModule,), {'__annotations__': {}})\n",
        ),
        # A backslash joins the next statement to the import that goes.
        (
            "import jax\nimport equinox as eqx; \\\n X = 1\n"
            "class A(eqx.Module):\n    y: jax.Array\n",
            "import arrayfield as af\nimport jax\nX = 1\n"
            "class A(af.ArrayModule):\n    y: jax.Array\n",
        ),
    ],
)
def test_any_layout_is_rewritten_in_place(source, expected):
    assert migrate_source(source.encode(), fix=True).code == expected
    _check(source, fix=True)


def test_a_byte_order_mark_stays():
    source = "\ufeff" + HEAD + "class A(eqx.Module):\n    x: jax.Array\n"
    result = migrate_source(source.encode())
    assert result.encoding == "utf-8-sig"  # written back with its mark
    assert result.code == NEW_HEAD + "class A(af.ArrayModule):\n    x: jax.Array\n"


PLAIN = b"import equinox as eqx\nimport jax\nclass A(eqx.Module):\n    x: jax.Array\n"
CONVERTED = (
    b"import equinox as eqx\nimport jax\nimport jax.numpy as jnp\n"
    b"class A(eqx.Module):\n    x: jax.Array = eqx.field(converter=jnp.asarray)"
)


# Layouts that once set two writers apart: each must come out as valid code
# with the input's tree (less the planned edits), by the command's own path.
@pytest.mark.parametrize(
    "data",
    [
        # Whitespace that is no line break: a form feed, a lone carriage return.
        PLAIN + b"\r",
        b"import equinox as eqx\rclass A(eqx.Module):\r    pass\reqx\r",
        PLAIN + b"\x0cY = 1\n",
        b"import equinox as eqx\nimport jax\nclass A(eqx.Module):\n"
        b"    y: int\n\x0c    x: jax.Array\n",
        PLAIN + b"\n\t",
        PLAIN + b"\r\t\n",
        # The last line, without a newline.
        CONVERTED,
        b"import equinox as eqx\nimport numpy as np\nclass A(eqx.Module):\n"
        b"    x: np.array",
        # A backslash joins a rewritten statement to the line before.
        CONVERTED.replace(b":\n    x", b": \\\n    x").replace(
            b"(conv", b"(  # c\n conv"
        )
        + b"\n",
        CONVERTED.replace(b":\n    x", b":\n    y: int = 1; \\\n    x") + b"\n",
        # Names spelled in a way Python folds to NFKC: the same names.
        "import equinox as eqx\nimport jax\n# eqx\nclass A(eqx.Module):\n"
        "    y: jax.Array\nprint(\uff45qx)\n".encode(),
        "import equinox as eqx\nimport jax\nclass A(eqx.\uff2dodule):\n"
        "    y: jax.Array\n".encode(),
        b"import equinox as q\xcc\x81\xcc\xa3\nclass A(q\xcc\xa3\xcc\x81.Module):\n"
        b"    x: int\n",
        # An import's name inside a string, glued to a digit or a letter.
        b"import equinox as eqx\nclass A(eqx.Module):\n    x: int\ns = '1eqx'\n",
    ],
)
def test_the_runner_writes_valid_code_with_the_input_tree(data):
    contents = {Path("m.py"): data}
    index, errors = _runner.index_project(contents)
    assert not errors
    for fix, typed in itertools.product([False, True], repeat=2):
        results = _runner.rewrite_files(
            [Path("m.py")], contents, index, fix=fix, typed=typed, text=True
        )
        result = next(results)
        assert result.changed
        _check(data.decode(), fix=fix, typed=typed)


def test_a_name_python_reads_as_the_import_keeps_it():
    # A fullwidth e is an e to Python: the import stays, the base is migrated.
    source = (
        "import equinox as eqx\nimport jax\nclass A(eqx.\uff2dodule):\n"
        "    y: jax.Array\nprint(\uff45qx)\n"
    )
    code = migrate_source(source.encode()).code
    assert "import equinox as eqx\n" in code
    assert "class A(af.ArrayModule):" in code


def test_a_dropped_import_leaves_its_comments_and_no_doubled_blank_lines():
    source = (
        "import jax\nimport equinox as eqx\n\n# about the model\n\n"
        "import jax.numpy as jnp\n\nclass A(eqx.Module):\n"
        "    x: jax.Array = eqx.field(converter=jnp.asarray)\n"
    )
    # The blank lines above the dropped `jnp` import go (the class has one of
    # its own); the comment stays above what follows.
    assert migrate_source(source).code == (
        "import arrayfield as af\nimport jax\n# about the model\n\n"
        "class A(af.ArrayModule):\n    x: af.Field[jax.Array]\n"
    )
    nested = (
        "import jax\nimport equinox as eqx\n\n\ndef make():\n"
        "    # the converter's module\n    import jax.numpy as jnp\n"
        "    return jnp\n\n\nclass A(eqx.Module):\n    x: jax.Array\n"
    )
    # Still used in the function: it stays, comment and all.
    assert "    # the converter's module\n    import jax.numpy as jnp\n" in (
        migrate_source(nested).code
    )


# A converter argument dropped from calls laid out every way (the text the
# first writer, libcst's, gave for each; the comments around the argument stay).
CONVERTER_HEAD = (
    "import equinox as eqx\nimport jax\nimport jax.numpy as jnp\n\n\n"
    "class A(eqx.Module):\n"
)


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        (
            "    x: jax.Array = eqx.field(converter=jnp.asarray, default=(1.0, 2.0))\n",
            "    x: af.Field[jax.Array] = eqx.field(default=(1.0, 2.0))\n",
        ),
        (
            "    x: jax.Array = eqx.field(default=f(1, g=2), converter=jnp.asarray)\n",
            "    x: af.Field[jax.Array] = eqx.field(default=f(1, g=2))\n",
        ),
        (
            "    x: jax.Array = eqx.field(\n"
            "        default=1.0,\n"
            "        # before\n"
            "        converter=jnp.asarray,  # on it\n"
            "        # after\n"
            "        static=False,\n"
            "    )\n",
            "    x: af.Field[jax.Array] = eqx.field(\n"
            "        default=1.0,  # on it\n"
            "        # before\n"
            "        # after\n"
            "        static=False,\n"
            "    )\n",
        ),
        (
            "    x: jax.Array = eqx.field(  # head\n"
            "        converter=jnp.asarray,  # on it\n"
            "        default=1.0  # last\n"
            "    )\n",
            "    x: af.Field[jax.Array] = eqx.field(  # head\n"
            "        # on it\n"
            "        default=1.0  # last\n"
            "    )\n",
        ),
        (
            "    x: jax.Array = eqx.field(default=1.0, converter=jnp.asarray,)\n",
            "    x: af.Field[jax.Array] = eqx.field(default=1.0,)\n",
        ),
        (
            "    x: jax.Array = eqx.field(default=1.0,\n"
            "                             converter=jnp.asarray)\n",
            "    x: af.Field[jax.Array] = eqx.field(default=1.0)\n",
        ),
        (
            "    x: jax.Array = eqx.field(  # only\n"
            "        converter=jnp.asarray  # it\n"
            "    )  # after\n",
            "    # only\n    # it\n    x: af.Field[jax.Array]  # after\n",
        ),
        (
            "    x: (jax.Array) = (eqx.field(converter=jnp.asarray, default=0.0))\n",
            "    x: af.Field[(jax.Array)] = (eqx.field(default=0.0))\n",
        ),
    ],
)
def test_a_dropped_converter_keeps_the_comments_around_it(field, expected):
    code = migrate_source(CONVERTER_HEAD + field).code
    assert code.partition("class A(af.ArrayModule):\n")[2] == expected
    _check(CONVERTER_HEAD + field)


# The imports of files laid out every way, after the converter goes (the text
# the libcst writer gave for each): `af` added where isort puts it, `eqx` and
# `jnp` dropped where nothing uses them, kept where something still does.
IMPORTS_BODY = (
    "\n\nclass A(eqx.Module):\n    x: jax.Array = eqx.field(converter=jnp.asarray)\n"
)


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (
            '"""Doc."""\n'
            "\n"
            "import equinox as eqx\n"
            "import jax\n"
            "import jax.numpy as jnp\n"
            "\n",
            '"""Doc."""\n\nimport arrayfield as af\nimport jax\n\n',
        ),
        (
            "# header\nimport jax, jax.numpy as jnp\nimport equinox as eqx\n\n",
            "# header\nimport arrayfield as af\nimport jax\n\n",
        ),
        (
            "from __future__ import annotations\n"
            "\n"
            "import os\n"
            "\n"
            "import equinox as eqx\n"
            "import jax\n"
            "from jax import numpy as jnp\n"
            "\n",
            "from __future__ import annotations\n"
            "\n"
            "import os\n"
            "\n"
            "import arrayfield as af\n"
            "import jax\n"
            "\n",
        ),
        (
            "import jax\nimport jax.numpy as jnp; import equinox as eqx\n\n",
            "import arrayfield as af\nimport jax\n\n",
        ),
        (
            "import jax\n"
            "import equinox as eqx\n"
            "try:\n"
            "    import jax.numpy as jnp\n"
            "except ImportError:\n"
            "    jnp = None\n"
            "\n",
            "import arrayfield as af\n"
            "import jax\n"
            "try:\n"
            "    import jax.numpy as jnp\n"
            "except ImportError:\n"
            "    jnp = None\n"
            "\n",
        ),
        (
            "import jax\n"
            "import equinox as eqx\n"
            "if True:\n"
            "    # np too\n"
            "    import jax.numpy as jnp\n"
            "    import numpy as np\n"
            "\n",
            "import arrayfield as af\n"
            "import jax\n"
            "if True:\n"
            "    # np too\n"
            "    import numpy as np\n"
            "\n",
        ),
    ],
)
def test_imports_are_added_and_dropped_in_any_layout(head, expected):
    code = migrate_source(head.removesuffix("\n") + IMPORTS_BODY).code
    assert code.partition("\n\nclass A")[0] + "\n" == expected
    _check(head + IMPORTS_BODY)


@pytest.mark.parametrize("after", ["x = 1", "def f(): pass", "import sys"])
def test_a_trailing_semicolon_joins_nothing_on_a_later_line(after):
    # `a;` ends its line: what follows on a later line stays a statement of its
    # own when an import before the `;` is dropped.
    head = f"import os; from equinox import Module;\n\n{after}\n"
    source = head + "\n\nclass A(Module):\n    x: float = 1.0\n"
    code = migrate_source(source).code
    assert code.startswith(f"import arrayfield as af\nimport os;\n\n{after}\n"), code
    ast.parse(code)
