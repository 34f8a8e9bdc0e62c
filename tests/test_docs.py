"""Every Python block in README.md, docs/*.md and the public docstrings runs.

Conventions for Markdown pages:

- Each ```python block runs in a fresh module namespace.
- A block preceded by the line `<!-- docs-test: continue -->` runs in the namespace
  of the block before it on the same page (the two are tested together).
- A block preceded by `<!-- docs-test: subprocess -->` runs in its own Python
  process: for examples that change global JAX state, such as `jax_enable_x64`.
- A block with `<!-- docs-test: needs-sharing -->` among the lines before it shows
  af.filter_jit sharing callables or numbers: skipped where it cannot share.
- A ```text block that directly follows a ```python block, with only a line
  `Output:` between them, is what the Python block prints; stdout must match it,
  up to trailing whitespace.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import io
import re
import sys
import textwrap
import types
from pathlib import Path

import pytest

import arrayfield
from arrayfield import _jax_private
from helpers import run_code

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Docstring examples that show af.filter_jit sharing callables or numbers (or a
# family's export, which shares numbers as it does), which it does not do on the
# oldest supported equinox and JAX (docs/many_fields.md says why), or count
# compiles by program name, which the oldest JAX does not give: skipped there
# only. Pages mark such blocks with NEEDS_SHARING_MARK (a mark moves with its
# block; a line number moved whenever a published table above it grew).
NEEDS_SHARING = {"af.RetraceNote", "af.export_family", "af.ExportedFamily"}
CONTINUE = "<!-- docs-test: continue -->"
SUBPROCESS = "<!-- docs-test: subprocess -->"
NEEDS_SHARING_MARK = "<!-- docs-test: needs-sharing -->"
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[ \t]*$")


@dataclasses.dataclass
class Block:
    where: str  # "docs/faq.md:12"
    source: str
    marker: str | None  # CONTINUE, SUBPROCESS or None
    output: str | None  # the expected stdout, if the page shows one
    needs_sharing: bool = False  # NEEDS_SHARING_MARK before it


def _fences(lines: list[str]) -> list[tuple[int, int, str]]:
    """(opening line, closing line, language) of each fenced block."""
    fences = []
    index = 0
    while index < len(lines):
        match = _FENCE.match(lines[index])
        if match is None:
            index += 1
            continue
        closing = f"{match['indent']}```"
        end = index + 1
        while end < len(lines) and lines[end].rstrip() != closing:
            end += 1
        fences.append((index, end, match["lang"]))
        index = end + 1
    return fences


def _previous_text(lines: list[str], before: int, after: int) -> list[str]:
    """The non-blank lines strictly between two line numbers."""
    return [line.strip() for line in lines[after + 1 : before] if line.strip()]


def python_blocks(text: str, name: str) -> list[Block]:
    lines = text.splitlines()
    fences = _fences(lines)
    blocks = []
    for position, (start, end, lang) in enumerate(fences):
        if lang != "python":
            continue
        previous_end = fences[position - 1][1] if position else -1
        between = _previous_text(lines, start, previous_end)
        marks = [line for line in between if line != NEEDS_SHARING_MARK]
        marker = marks[-1] if marks and marks[-1] in (CONTINUE, SUBPROCESS) else None
        output = None
        if position + 1 < len(fences):
            next_start, next_end, next_lang = fences[position + 1]
            if next_lang == "text" and _previous_text(lines, next_start, end) == [
                "Output:"
            ]:
                output = textwrap.dedent("\n".join(lines[next_start + 1 : next_end]))
        source = textwrap.dedent("\n".join(lines[start + 1 : end]))
        blocks.append(
            Block(
                f"{name}:{start + 1}",
                source,
                marker,
                output,
                needs_sharing=NEEDS_SHARING_MARK in between,
            )
        )
    return blocks


def chains(blocks: list[Block]) -> list[list[Block]]:
    """Blocks grouped with the `continue` blocks that follow them."""
    grouped: list[list[Block]] = []
    for block in blocks:
        if block.marker == CONTINUE:
            assert grouped, f"{block.where}: nothing to continue"
            assert grouped[-1][0].marker != SUBPROCESS, (
                f"{block.where}: a subprocess block cannot be continued"
            )
            grouped[-1].append(block)
        else:
            grouped.append([block])
    return grouped


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def _check_output(block: Block, printed: str) -> None:
    if block.output is not None:
        assert _normalise(printed) == _normalise(block.output), (
            f"{block.where}: printed output differs from the page"
        )


def run_in_process(chain: list[Block]) -> None:
    # A real module in sys.modules, as for a script: dataclasses and arrayfield
    # look up a class's module to resolve string annotations.
    name = "docs_example_" + re.sub(r"\W", "_", chain[0].where)
    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        for block in chain:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                # dont_inherit: this file's `from __future__ import annotations`
                # must not leak into the examples (it would hide NameErrors).
                code = compile(block.source, block.where, "exec", dont_inherit=True)
                exec(code, module.__dict__)
            _check_output(block, printed.getvalue())
    finally:
        del sys.modules[name]


def run_in_subprocess(block: Block) -> None:
    result = run_code(block.source)
    assert result.returncode == 0, f"{block.where} failed:\n{result.stderr}"
    _check_output(block, result.stdout)


def _page_chains() -> list[list[Block]]:
    return [
        chain
        for page in PAGES
        for chain in chains(
            python_blocks(page.read_text(), str(page.relative_to(ROOT)))
        )
    ]


def test_the_examples_marked_as_needing_sharing_show_it():
    # The mark skips an example on the oldest versions: one that does not show
    # sharing must not be skipped there.
    marked = [chain for chain in _page_chains() if chain[0].needs_sharing]
    assert marked
    for chain in marked:
        source = "\n".join(block.source for block in chain)
        about = ("filter_jit", "export_family")
        assert any(name in source for name in about), chain[0].where


@pytest.mark.parametrize("chain", _page_chains(), ids=lambda chain: chain[0].where)
def test_markdown_python_block_runs(chain: list[Block]):
    if chain[0].needs_sharing and _jax_private.sharing_problem() is not None:
        pytest.skip("shows af.filter_jit sharing: not on this JAX or equinox")
    if chain[0].marker == SUBPROCESS:
        run_in_subprocess(chain[0])
    else:
        run_in_process(chain)


# -- public names: docstrings and the API page ---------------------------------


def public_names() -> list[str]:
    names = getattr(arrayfield, "__all__", None)
    if names is None:
        names = [
            name
            for name, value in vars(arrayfield).items()
            if not name.startswith("_") and not isinstance(value, types.ModuleType)
        ]
    return sorted(names)


@pytest.mark.parametrize("name", public_names())
def test_public_name_has_equinox_style_docstring_with_example(name: str):
    doc = inspect.getdoc(getattr(arrayfield, name))
    assert doc, f"af.{name} has no docstring"
    assert "!!! example" in doc, f"af.{name}'s docstring has no `!!! example` block"


@pytest.mark.parametrize("name", public_names())
def test_public_docstring_examples_run(name: str):
    if f"af.{name}" in NEEDS_SHARING and _jax_private.sharing_problem() is not None:
        pytest.skip("shows af.filter_jit sharing: not on this JAX or equinox")
    doc = inspect.getdoc(getattr(arrayfield, name)) or ""
    blocks = python_blocks(doc, f"af.{name}")
    if not blocks:
        pytest.skip(f"af.{name} has no example (the test above fails for it)")
    for chain in chains(blocks):
        if chain[0].marker == SUBPROCESS:  # it changes JAX's global state
            run_in_subprocess(chain[0])
        else:
            run_in_process(chain)


@pytest.mark.parametrize("name", public_names())
def test_api_page_documents_public_name(name: str):
    api = (ROOT / "docs" / "api.md").read_text()
    assert re.search(rf"^::: arrayfield\.{name}$", api, flags=re.M), (
        f"docs/api.md has no `::: arrayfield.{name}`"
    )


# -- the collector itself --------------------------------------------------------

_SAMPLE = """\
Intro.

```python
print("a")
```

Output:

```text
a
```

<!-- docs-test: continue -->
```python
x = 1
```

```text
not output: no "Output:" line
```

    ```python
    indented = True
    ```
"""


def test_collector_reads_outputs_markers_and_indented_blocks():
    blocks = python_blocks(_SAMPLE, "sample")
    assert [b.source for b in blocks] == ['print("a")', "x = 1", "indented = True"]
    assert [b.output for b in blocks] == ["a", None, None]
    assert [b.marker for b in blocks] == [None, CONTINUE, None]
    assert [len(chain) for chain in chains(blocks)] == [2, 1]


def test_wrong_output_fails():
    block = Block("sample:1", 'print("a")', None, "b")
    with pytest.raises(AssertionError, match="printed output differs"):
        run_in_process([block])


def test_annotations_in_examples_are_evaluated():
    block = Block("sample:1", "class A:\n    x: Undefined", None, None)
    with pytest.raises(NameError):
        run_in_process([block])
