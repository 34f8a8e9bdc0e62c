"""What the codemod reports when a field needs a human decision, and `# noqa`.

The codemod rewrites what it can prove safe and reports the rest. Each report
is a `Diagnostic`; the command line prints it as ``path:line:col: CODE message``.
The codes, their summaries and their messages live in `_checks`, one module
per code.
"""

from __future__ import annotations

import dataclasses
import re

# One line per code, shown in `arrayfield migrate --help`; each code's check
# and message are in `_checks`.
CODES: dict[str, str] = {
    "AF001": (
        "non-static field annotated float/complex (or an int that eqx.tree_at "
        "replaces) without an array converter and not used in control flow or as a "
        'size: use Float[Array, ""] (or Complex/Int[Array, ""]) so a new value does '
        "not recompile; a number default nothing in the project sets is a "
        "constant: static=True first"
    ),
    "AF002": (
        "array-annotated field used as a shape or size (in its class or a "
        "subclass), or assigned a shape-like value: declare it "
        "af.field(convert=False) (--fix does, for fields used so or assigned a "
        "helper's list of ints)"
    ),
    "AF003": (
        "array-annotated field declared static=True: arrays are not "
        "hashable configuration; drop static=True or fix the annotation"
    ),
    "AF004": (
        "converter kept because it makes NumPy arrays for a JAX-annotated "
        "field, or JAX arrays for an np.ndarray one: make the annotation say which"
    ),
    "AF005": (
        "non-static field holding a value made per instance (a lambda, a "
        "functools.partial, a string set per instance, an object hashed by "
        "identity; pytrees are not reported, and a class from outside the project "
        "'may be' one): every new instance recompiles; the message says how to fix it"
    ),
    "AF006": (
        "Module class made by type(...) inside a function: each call makes a "
        "new class, so each new instance recompiles; make the class once"
    ),
    "AF007": (
        "array-annotated field with a numeric default (or a number set in a "
        "method) that was a Python number: it now takes part in eqx.filter, "
        "gradients and optax updates; static=True, af.field(convert=False) "
        "(--fix does, unless # noqa: AF007 says it should train) or "
        "jax.lax.stop_gradient if it must not train"
    ),
    "AF008": (
        "a Module class the codemod migrates built as a vmap axis spec "
        "(in_axes=Cls(None, 0)): as an af.ArrayModule it stores the int axis as "
        "an array, which jax.vmap refuses; build the spec with eqx.tree_at"
    ),
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
    # Whether `--fix` would need to decide it and cannot: it then exits with
    # status 3 (a model that may now train what it held constant).
    undecided: bool = False

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
