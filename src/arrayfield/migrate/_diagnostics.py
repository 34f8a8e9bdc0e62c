"""What the codemod reports when a field needs a human decision.

The codemod rewrites what it can prove safe and reports the rest. Each report
is a `Diagnostic`; the command line prints it as ``path:line:col: CODE message``.
The message builders live here so that the wording, the `--help` epilog and
docs/migration.md all describe the same rules.
"""

from __future__ import annotations

import dataclasses
import re

# One line per code, shown in `arrayfield migrate --help`.
CODES: dict[str, str] = {
    "AF001": "non-static field annotated float/complex (or an int that "
    "eqx.tree_at replaces) without an array converter and not used in control "
    'flow or as a size: use Float[Array, ""] (or Complex/Int[Array, ""]) so a '
    "new value does not recompile",
    "AF002": "array-annotated field used as a shape or size (in its class or a "
    "subclass), or assigned a shape-like value: declare it "
    "af.field(convert=False) (--fix does, for fields used so)",
    "AF003": "array-annotated field declared static=True: arrays are not "
    "hashable configuration; drop static=True or fix the annotation",
    "AF004": "converter kept because it makes NumPy arrays for a JAX-annotated "
    "field, or JAX arrays for an np.ndarray one: make the annotation say which",
    "AF005": "non-static field holding a value made per instance (a lambda, a "
    "functools.partial, a string set per instance, an object hashed by "
    "identity): every new instance recompiles; the message says how to fix it",
    "AF006": "Module class made by type(...) inside a function: each call makes a "
    "new class, so each new instance recompiles; make the class once",
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
    # Whether `arrayfield migrate --fix` makes the edit the message asks for.
    fixable: bool = False

    def format(self, path: str) -> str:
        """Render as ``path:line:col: CODE message``."""
        return f"{path}:{self.line}:{self.col}: {self.code} {self.message}"


# A bare no-qa comment, or one naming codes (any case, as flake8 and ruff accept).
_NOQA = re.compile(
    r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE
)
# Python's line breaks. str.splitlines also breaks at form feeds, \x1c-\x1e,
# \x85 and \u2028, which Python, libcst and patch(1) take as part of a line.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def source_lines(source: str) -> list[str]:
    """The lines of a source file, numbered as Python numbers them."""
    return _LINE_BREAK.split(source)


def suppressed(lines: list[str], line: int, code: str) -> bool:
    """Whether `# noqa` or `# noqa: AF001, AF002` on line `line` (1-based) of
    `lines` (from `source_lines`) silences `code`."""
    if not 0 < line <= len(lines):
        return False
    match = _NOQA.search(lines[line - 1])
    if match is None:
        return False
    codes = match.group("codes")
    return codes is None or code in re.split(r"[,\s]+", codes.strip().upper())


_JAXTYPING_NAMES = {"complex": "Complex", "int": "Int"}


def scalar_field(cls: str, field: str, type_name: str, evidence: str = "") -> str:
    """`evidence` says where the field gets new values, e.g. "it is replaced
    with eqx.tree_at at fit.py:12", or is empty."""
    jaxtyping_name = _JAXTYPING_NAMES.get(type_name, "Float")
    because = f" ({evidence})" if evidence else ""
    return (
        f"field '{cls}.{field}' is annotated `{type_name}`; every new value "
        f"recompiles a jitted function that receives the model{because}. "
        f'Annotate it `{field}: {jaxtyping_name}[Array, ""]` so arrayfield turns '
        "it into a traced array, or declare it static=True if it is configuration."
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


def shape_used_field(cls: str, field: str, use: str, where: str) -> str:
    """`use` is "a shape or size" or "a Python condition"; `where` is path:line."""
    return (
        f"field '{cls}.{field}' is annotated as an array but used as {use} at "
        f"{where}; arrayfield would store it as an array, which fails there under "
        "jit. Declare it `af.field(convert=False)` (--fix does) or static=True, "
        "or annotate the Python type it holds (e.g. `tuple[int, ...]`)."
    )


def per_instance_field(cls: str, field: str, kind: str, where: str, what: str) -> str:
    """`kind` is one of _index's LAMBDA, PARTIAL, STRING, OBJECT; `what` names
    the class instantiated, for OBJECT."""
    head = f"field '{cls}.{field}' holds "
    tail = (
        "; eqx.filter_jit treats it as a static part of the model, so every new "
        "instance compiles again. "
    )
    if kind == "lambda":
        return (
            f"{head}a lambda made per instance ({where}), compared by identity{tail}"
            "Define the function once at module level and assign that function."
        )
    if kind == "partial":
        return (
            f"{head}a functools.partial made per instance ({where}), compared by "
            f"identity{tail}Use jax.tree_util.Partial: its function is compared "
            "by equality and its arguments are traced leaves."
        )
    if kind == "string":
        return (
            f"{head}a string that differs per instance ({where}){tail}Keep "
            "per-instance names and keys out of the jitted arguments (store them "
            "outside the model, or eqx.partition them off), or map them to an "
            "integer array index."
        )
    return (
        f"{head}a `{what}` object ({where}), hashed by identity{tail}Convert what "
        "the jitted code needs to arrays in a Module, or give the class "
        "value-based __eq__/__hash__ and declare the field static=True, or keep "
        "the object out of the jitted arguments."
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


def class_per_call(name: str) -> str:
    return (
        f"Module class {name} is made with type(...) each time this function runs; "
        "instances of different class objects never share a compilation, so every "
        "call recompiles a jitted function that receives one. Make the class once: "
        "at module level, or in a factory decorated with functools.cache that "
        "takes its field names."
    )
