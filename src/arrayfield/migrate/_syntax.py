"""Reading expressions the same way from an `ast` tree and from a libcst tree.

The checks (`_checks`), the annotation readers (`_annotations`) and the plan
(`_plan`) run over both: over libcst when a file is rewritten, over `ast` when
`arrayfield migrate --check` only reports. Each reader here answers one
question about a node of either kind, so that both front ends reach the same
verdict through the same code. libcst is never imported here: a libcst node is
recognised by not being an `ast.AST`.

Where the two trees differ in shape, the `ast` side checks that the code at
hand reads the same under both (`ensure_same_reading`) and raises `Undecidable`
where it might not: an implicitly concatenated string is one `ast.Constant` but
a libcst `ConcatenatedString`, and `X[(a, b)]` has one index in libcst but two
in `ast`. The caller then reads the file with libcst.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import Any

# Constants that libcst parses as names.
_NAMED_CONSTANTS = {True: "True", False: "False", None: "None"}


def identifier(node: Any) -> str | None:
    """`x` for the bare name `x` (and `True`, `False`, `None`), else None."""
    if isinstance(node, ast.AST):
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Constant) and (
            node.value is None or isinstance(node.value, bool)
        ):
            return _NAMED_CONSTANTS[node.value]
        return None
    return node.value if type(node).__name__ == "Name" else None


def attribute_name(node: Any) -> str | None:
    """`shape` for `x.shape`, else None."""
    if isinstance(node, ast.AST):
        return node.attr if isinstance(node, ast.Attribute) else None
    return node.attr.value if type(node).__name__ == "Attribute" else None


def string_value(node: Any) -> str | None:
    """The text of a single (not concatenated, not formatted) str literal."""
    if isinstance(node, ast.AST):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        return None
    if type(node).__name__ != "SimpleString":
        return None
    value = node.evaluated_value
    return value if isinstance(value, str) else None


class Undecidable(Exception):
    """The `ast` reading of some code may differ from libcst's."""


def segment(lines: list[bytes], node: ast.AST) -> str:
    """The source of an `ast` node; `lines` are the UTF-8 lines, ends kept."""
    start, end = node.lineno - 1, node.end_lineno or node.lineno  # type: ignore[attr-defined]
    if start == end - 1:
        line = lines[start]
        return line[node.col_offset : node.end_col_offset].decode()  # type: ignore[attr-defined]
    chunk = b"".join(lines[start:end])
    tail = len(lines[end - 1]) - node.end_col_offset  # type: ignore[attr-defined]
    return chunk[node.col_offset : len(chunk) - tail].decode()  # type: ignore[attr-defined]


# One short string literal, with no escapes and no quotes inside: what most
# annotations' strings (`Float[Array, "n"]`) are; the tokenizer decides the rest.
_PLAIN_STRING = re.compile(r"""[rRbBuU]{0,2}(?:"[^"\\\n]*"|'[^'\\\n]*')""")


def one_string_token(text: str) -> bool:
    """Whether `text` is one string literal (not `"a" "b"`), comments aside."""
    if _PLAIN_STRING.fullmatch(text):
        return True
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    kinds = [t.type for t in tokens if t.type not in _LAYOUT_TOKENS]
    return kinds == [tokenize.STRING]


_LAYOUT_TOKENS = frozenset(
    {tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.COMMENT}
)


def ensure_same_reading(expr: ast.AST, lines: list[bytes]) -> None:
    """Raise `Undecidable` where the readers above may answer differently for
    `expr` than for libcst's parse of the same text."""
    # A walk of its own, not `ast.walk`: every field's annotation is walked, and
    # names and attributes, most of what annotations hold, end it at once.
    stack = [expr]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is ast.Name:
            continue
        if kind is ast.Attribute:
            stack.append(node.value)  # type: ignore[attr-defined]
        elif kind is ast.Constant:
            if isinstance(node.value, str) and not one_string_token(  # type: ignore[attr-defined]
                segment(lines, node)
            ):
                raise Undecidable("implicitly concatenated string")
        elif kind is ast.Subscript:
            index = node.slice  # type: ignore[attr-defined]
            if isinstance(index, ast.Tuple) and (
                any(isinstance(item, ast.Starred) for item in index.elts)
                or segment(lines, index).startswith("(")
            ):
                raise Undecidable("parenthesized or starred index")
            stack += (node.value, index)  # type: ignore[attr-defined]
        else:
            stack.extend(ast.iter_child_nodes(node))


def parse_expression(text: str, like: Any) -> Any | None:
    """`text` parsed as an expression by the parser that made `like`, or None."""
    if isinstance(like, ast.AST):
        try:
            parsed = ast.parse(text, mode="eval").body
        except (SyntaxError, ValueError):
            return None
        ensure_same_reading(parsed, text.encode().splitlines(keepends=True))
        return parsed
    import libcst as cst

    try:
        return cst.parse_expression(text)
    except cst.ParserSyntaxError:
        return None


def number_type(node: Any) -> type | None:
    """`int`, `float` or `complex` for an unsigned number literal, else None."""
    if isinstance(node, ast.AST):
        if isinstance(node, ast.Constant) and not isinstance(node.value, bool):
            kind = type(node.value)
            return kind if kind in (int, float, complex) else None
        return None
    return {"Integer": int, "Float": float, "Imaginary": complex}.get(
        type(node).__name__
    )


def unary(node: Any) -> tuple[str, Any] | None:
    """`("-", x)` for `-x`, `("+", x)` for `+x`, else None."""
    if isinstance(node, ast.AST):
        if isinstance(node, ast.UnaryOp):
            sign = {ast.USub: "-", ast.UAdd: "+"}.get(type(node.op))
            return None if sign is None else (sign, node.operand)
        return None
    if type(node).__name__ != "UnaryOperation":
        return None
    sign = {"Minus": "-", "Plus": "+"}.get(type(node.operator).__name__)
    return None if sign is None else (sign, node.expression)


def signed_number_type(node: Any) -> type | None:
    """`number_type` of a number literal with or without a sign (`-1e-6`)."""
    signed = unary(node)
    return number_type(node if signed is None else signed[1])


def union_operands(node: Any) -> tuple[Any, Any] | None:
    """`(X, Y)` for `X | Y`, else None."""
    if isinstance(node, ast.AST):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return node.left, node.right
        return None
    if (
        type(node).__name__ == "BinaryOperation"
        and type(node.operator).__name__ == "BitOr"
    ):
        return node.left, node.right
    return None


def is_subscript(node: Any) -> bool:
    """Whether `node` is `value[...]` (its `.value` is the subscripted part)."""
    return type(node).__name__ == "Subscript"


def subscript_items(node: Any) -> list[Any]:
    """The index expressions of a subscript, slices left out: `[Array, "n"]`
    for `Float[Array, "n"]`."""
    if isinstance(node, ast.Subscript):
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return [item for item in items if not isinstance(item, ast.Slice)]
    return [
        element.slice.value
        for element in node.slice
        if type(element.slice).__name__ == "Index"
    ]


def display_elements(node: Any) -> list[tuple[bool, Any]] | None:
    """`(starred, value)` for each element of a tuple or list display, else None."""
    if isinstance(node, ast.AST):
        if not isinstance(node, ast.Tuple | ast.List):
            return None
        return [
            (True, e.value) if isinstance(e, ast.Starred) else (False, e)
            for e in node.elts
        ]
    if type(node).__name__ not in ("Tuple", "List"):
        return None
    return [(type(e).__name__ == "StarredElement", e.value) for e in node.elements]


def is_call(node: Any) -> bool:
    """Whether `node` is a call (its `.func` is what is called)."""
    return type(node).__name__ == "Call"


def call_arguments(node: Any) -> list[Any]:
    """The arguments of a call in source order, each with a `.value`: libcst
    `Arg`s, or `ast` nodes (a `Starred`, a `keyword` or a plain expression,
    which `argument_value` reads)."""
    if not isinstance(node, ast.Call):
        return list(node.args)
    arguments: list[Any] = [*node.args, *node.keywords]
    if node.keywords and node.args:
        arguments.sort(key=lambda arg: (arg.lineno, arg.col_offset))
    return arguments


def argument_value(argument: Any) -> Any:
    """The expression an argument of `call_arguments` passes."""
    if isinstance(argument, ast.AST):
        if isinstance(argument, ast.Starred | ast.keyword):
            return argument.value
        return argument
    return argument.value


def is_plain_positional(argument: Any) -> bool:
    """Whether an argument of `call_arguments` is `f(x)`'s x: no keyword, no star."""
    if isinstance(argument, ast.AST):
        return not isinstance(argument, ast.Starred | ast.keyword)
    return argument.keyword is None and not argument.star


def call_keywords(node: Any) -> dict[str, Any]:
    """Keyword name -> its argument (with a `.value`) for a call."""
    if isinstance(node, ast.Call):
        return {kw.arg: kw for kw in node.keywords if kw.arg is not None}
    return {arg.keyword.value: arg for arg in node.args if arg.keyword}
