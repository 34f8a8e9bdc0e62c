"""`--diff` and `--fix` splice the `ast` plan into the text (`_splice`, issue 30:
a generated 5 MB file took minutes and gigabytes while libcst parsed and
rebuilt all of it). libcst parses only the pieces it rewrites, and where a
piece could read differently from the whole file the rewrite is libcst's own,
so the text is the same either way (`test_migrate_readers.py` compares the
two readings on every input the migrate tests have).
"""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import libcst
import pytest

from arrayfield.__main__ import main
from arrayfield.migrate import _runner
from arrayfield.migrate._check_ast import analyse_source
from arrayfield.migrate._splice import splice_source
from arrayfield.migrate._syntax import Undecidable
from arrayfield.migrate._transform import migrate_source
from test_migrate_writes import _classes

CONVERTERS = '''\
"""Fields whose converters go: libcst rewrites each of those statements."""

import equinox as eqx
import jax
import jax.numpy as jnp


'''
CONVERTER_UNIT = """\
class Part{n}(eqx.Module):
    weight: jax.Array = eqx.field(converter=jnp.asarray)  # dropped whole
    bias: jax.Array = eqx.field(
        converter=jnp.asarray,  # the converter goes, its comment stays
        default=0.0,
    )

    def __call__(self, x):
        return self.weight * x + self.bias


"""


def _spliced(source: str, *, fix: bool = False, typed: bool = False) -> str:
    """The spliced text, checked against libcst's rewrite of the whole file."""
    data = source.encode()
    spliced = splice_source(analyse_source(data, fix=fix, typed=typed)).code
    assert spliced == migrate_source(data, fix=fix, typed=typed).code
    return spliced


@pytest.mark.parametrize("flags", [[], ["--typed"], ["--fix", "--typed"]], ids=str)
@pytest.mark.parametrize("kind", ["classes", "converters"])
def test_libcst_parses_only_the_pieces_it_rewrites(
    tmp_path, monkeypatch, capfd, flags, kind
):
    if kind == "classes":
        source = _classes(300)
    else:
        source = CONVERTERS + "".join(CONVERTER_UNIT.format(n=n) for n in range(300))
    (tmp_path / "m.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    expected = _runner.READ_WITH_AST
    _runner.READ_WITH_AST = False  # the reference: libcst reads the whole file
    try:
        assert main(["migrate", "-j", "1", "--diff", *flags, "."]) == 1
    finally:
        _runner.READ_WITH_AST = expected
    reference = capfd.readouterr()

    parsed: list[str] = []
    parse_module = libcst.parse_module

    def recording(text, *args, **kwargs):
        parsed.append(text)
        return parse_module(text, *args, **kwargs)

    monkeypatch.setattr(libcst, "parse_module", recording)
    assert main(["migrate", "-j", "1", "--diff", *flags, "."]) == 1
    assert capfd.readouterr() == reference
    assert parsed  # the head at least: the imports change
    # The pieces: the head, and in the second file one module of the field
    # statements that lose their converter; no class or method.
    assert not any("class " in text or "def " in text for text in parsed)
    assert sum(map(len, parsed)) < 0.8 * len(source)


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
    spliced = _spliced(source)
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
    spliced = _spliced(source, typed=True)
    assert '    w: af.Field[Float[Array, "n"]]\n' in spliced
    assert (
        '    eps: af.Field[Float[Array, ""]] = af.field(default=1e-5)  # a' in spliced
    )
    assert "    legacy: af.Field[np.ndarray]\n" in spliced  # libcst's own respelling
    assert spliced.startswith('"""Doc."""\nimport arrayfield as af\nimport numpy')


HEAD = "import equinox as eqx\nimport jax\n\n\n"


@pytest.mark.parametrize(
    "source",
    [
        # The base in parentheses: libcst drops them with the node.
        HEAD + "class A((eqx.Module)):\n    x: jax.Array\n",
        # Another statement on the field's line.
        HEAD + "class A(eqx.Module):\n    x: jax.Array = eqx.field(converter="
        "jax.numpy.asarray); y: int = 1\n",
        # `eqx` is still written, but only in a comment: only libcst's reading
        # of the whole file tells that the import goes.
        HEAD + "class A(eqx.Module):  # was an eqx.Module\n    x: jax.Array\n",
        # The import to drop is inside a function.
        "import jax\n\n\ndef make():\n    import equinox as eqx\n\n"
        "    class A(eqx.Module):\n        x: jax.Array\n\n    return A\n",
        # `af` is a name already: a scope analysis picks the import.
        HEAD + "af = 1\n\n\nclass A(eqx.Module):\n    x: jax.Array\n",
        # A base in a `type(...)` call.
        HEAD + "A = type('A', (eqx.Module,), {'__annotations__': {'x': jax.Array}})\n",
        # A byte order mark.
        "\ufeff" + HEAD + "class A(eqx.Module):\n    x: jax.Array\n",
    ],
)
def test_where_a_piece_may_read_apart_the_whole_file_is_rewritten(source):
    data = source.encode()
    with pytest.raises(Undecidable):
        splice_source(analyse_source(data, fix=True))
    context = None
    result = _runner._transform_file({}, "m.py", data, context, True, False, True)
    assert result == migrate_source(data, context, fix=True)


PLAIN = b"import equinox as eqx\nimport jax\nclass A(eqx.Module):\n    x: jax.Array\n"
CONVERTED = (
    b"import equinox as eqx\nimport jax\nimport jax.numpy as jnp\n"
    b"class A(eqx.Module):\n    x: jax.Array = eqx.field(converter=jnp.asarray)"
)


# Where fuzzing the splice against libcst's whole-file rewrite found them apart
# (each spliced a text libcst does not write, before the splice learnt to tell).
@pytest.mark.parametrize(
    "data",
    [
        # Whitespace libcst does not write back as read.
        PLAIN + b"\r",
        b"import equinox as eqx\rclass A(eqx.Module):\r    pass\reqx\r",
        PLAIN + b"\x0cY = 1\n",
        b"import equinox as eqx\nimport jax\nclass A(eqx.Module):\n"
        b"    y: int\n\x0c    x: jax.Array\n",
        PLAIN + b"\n\t",
        PLAIN + b"\r\t\n",
        # The last line, without a newline, rewritten by libcst.
        CONVERTED,
        b"import equinox as eqx\nimport numpy as np\nclass A(eqx.Module):\n"
        b"    x: np.array",
        b"import equinox as eqx\nimport jax\nimport jax.numpy as jnp\n"
        b"class A(eqx.Module):\n    def f(self):\n        return jnp.zeros(self.n)\n"
        b"    n: jax.Array",
        # A backslash joins a rewritten statement to the line before.
        CONVERTED.replace(b":\n    x", b": \\\n    x").replace(
            b"(conv", b"(  # c\n conv"
        )
        + b"\n",
        CONVERTED.replace(b":\n    x", b":\n    y: int = 1; \\\n    x") + b"\n",
        b"import jax\nimport equinox as eqx; \\\n X = 1\n"
        b"class A(eqx.Module):\n    y: jax.Array\n",
        # Names that Python's parser folds to NFKC and libcst keeps.
        "import equinox as eqx\nimport jax\n# eqx\nclass A(eqx.Module):\n"
        "    y: jax.Array\nprint(\uff45qx)\n".encode(),
        "import equinox as eqx\nimport jax\nclass A(eqx.\uff2dodule):\n"
        "    y: jax.Array\n".encode(),
        "import equinox as eqx\nclass A(eqx.Module):\n    \ufb01eld: float\n".encode(),
        # NFKC reorders combining marks that are not `\w`.
        b"import equinox as q\xcc\x81\xcc\xa3\nclass A(q\xcc\xa3\xcc\x81.Module):\n"
        b"    x: int\n",
        # An import's name glued to a digit or a letter outside ASCII in a
        # string: libcst's reading of strings finds it there.
        b"import equinox as eqx\nclass A(eqx.Module):\n    x: int\ns = '1eqx'\n",
        "import equinox as eqx\nclass A(eqx.Module):\n    x: int\n"
        "s = 'eqx\xe9'\n".encode(),
    ],
)
def test_the_runner_writes_what_libcst_writes_where_fuzzing_found_them_apart(data):
    index, errors = _runner.index_project({Path("m.py"): data})
    assert not errors
    context = index.context("m.py")
    for fix, typed in itertools.product([False, True], repeat=2):
        result = _runner._transform_file({}, "m.py", data, context, fix, typed, True)
        reference = migrate_source(data, context, fix=fix, typed=typed)
        assert result == reference, (fix, typed)
