"""What the codemod reports when a field needs a human decision.

The codemod rewrites what it can prove safe and reports the rest. Each report
is a `Diagnostic`; the command line prints it as ``path:line:col: CODE message``.
The message builders live here so that the wording, the `--help` epilog and
docs/migration.md all describe the same rules.
"""

from __future__ import annotations

import dataclasses

# One line per code, shown in `arrayfield migrate --help`.
CODES: dict[str, str] = {
    "AF001": "non-static field annotated float/complex without an array "
    'converter: use Float[Array, ""] (or Complex[Array, ""]) so a new value '
    "does not recompile",
    "AF002": "array-annotated field assigned a shape-like value (list/tuple of "
    "ints, .shape): if it is a shape, declare it af.field(convert=False)",
    "AF003": "array-annotated field declared static=True: arrays are not "
    "hashable configuration; drop static=True or fix the annotation",
    "AF004": "converter kept because it makes NumPy arrays for a JAX-annotated "
    "field, or JAX arrays for an np.ndarray one: make the annotation say which",
}


@dataclasses.dataclass(frozen=True, order=True)
class Diagnostic:
    """A place in a source file that the codemod cannot decide about.

    **Fields:**

    - `line`: 1-based line number.
    - `col`: 1-based column number, as ruff and flake8 count them.
    - `code`: one of the keys of `CODES`, e.g. ``"AF001"``.
    - `message`: a sentence naming the field, what is wrong and what to do.
    """

    line: int
    col: int
    code: str
    message: str

    def format(self, path: str) -> str:
        """Render as ``path:line:col: CODE message``."""
        return f"{path}:{self.line}:{self.col}: {self.code} {self.message}"


def scalar_field(cls: str, field: str, type_name: str) -> str:
    jaxtyping_name = "Complex" if type_name == "complex" else "Float"
    return (
        f"field '{cls}.{field}' is annotated `{type_name}`; every new value "
        "recompiles a jitted function that receives the model. Annotate it "
        f'`{jaxtyping_name}[Array, ""]` so arrayfield turns it into a traced '
        "array, or declare it static=True if it is configuration."
    )


def shape_like_field(cls: str, field: str, snippet: str, line: int | None) -> str:
    """`line` is where the value is assigned, None for the class default."""
    if line is None:
        value = f"defaults to `{snippet}`"
    else:
        value = f"is assigned `{snippet}` on line {line}"
    return (
        f"field '{cls}.{field}' is annotated as an array but {value}. "
        "If it holds a shape or indices, declare "
        "it `af.field(convert=False)` so it stays a Python value under jit; "
        "if it really is data, leave it."
    )


def static_array_field(cls: str, field: str) -> str:
    return (
        f"field '{cls}.{field}' is annotated as an array but declared "
        "static=True. Static fields are hashed and compared on every call and "
        "arrayfield does not convert them. Drop static=True to make it a traced "
        "leaf, or annotate the Python type it holds (e.g. `tuple[int, ...]`)."
    )


def converter_kind_mismatch(cls: str, field: str, converter: str, kind: str) -> str:
    """`kind` is the annotation's array kind, "jax" or "numpy"."""
    if kind == "jax":
        return (
            f"field '{cls}.{field}' is annotated as a JAX array but "
            f"`converter={converter}` makes NumPy arrays. Under af.ArrayModule the "
            "annotation wins and the field will hold a JAX array: annotate it "
            "`np.ndarray` to keep NumPy, or delete the converter."
        )
    return (
        f"field '{cls}.{field}' is annotated `np.ndarray` but "
        f"`converter={converter}` makes JAX arrays, so it still holds JAX "
        "arrays. Annotate it `jax.Array` and delete the converter to let "
        "arrayfield do the conversion."
    )
