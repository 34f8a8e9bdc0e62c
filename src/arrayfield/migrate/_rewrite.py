"""The rewrite pass: apply an `Analysis` plan to a parsed file.

Only the nodes the plan names change (a base, a field's value, an annotation,
`Base = eqx.Module`); every other node, and so every other byte of the file, is
kept. Removing an argument from a field call keeps the comments around it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import libcst as cst

from ._bindings import ImportMap
from ._plan import SPECIFIERS, FieldEdit, Plan

# Legacy annotations: functions, not types; `ndarray` is the type each stands for.
LEGACY_ANNOTATIONS = frozenset({"numpy.array", "jax.numpy.array"})


def _has_comment(whitespace: cst.BaseParenthesizableWhitespace) -> bool:
    return isinstance(whitespace, cst.ParenthesizedWhitespace) and (
        whitespace.first_line.comment is not None
        or any(line.comment is not None for line in whitespace.empty_lines)
    )


def _joined(
    first: cst.BaseParenthesizableWhitespace,
    second: cst.BaseParenthesizableWhitespace,
    *,
    layout_of_second: bool,
) -> cst.BaseParenthesizableWhitespace:
    """The whitespace that replaces `first`, a removed argument and `second`:
    the layout of one of them (the other if only it breaks the line), with the
    comments of both."""
    layout = second if layout_of_second else first
    if not (_has_comment(first) or _has_comment(second)):
        return layout
    broken = [w for w in (first, second) if isinstance(w, cst.ParenthesizedWhitespace)]
    if not isinstance(layout, cst.ParenthesizedWhitespace):
        layout = broken[0]  # a comment ends its line: keep a line break
    head: cst.TrailingWhitespace | None = None
    lines: list[cst.EmptyLine] = []
    for whitespace in broken:
        comment = whitespace.first_line.comment
        if comment is not None and head is None:
            head = whitespace.first_line
        elif comment is not None:
            # On a line of its own, indented as the arguments are.
            indent = broken[0].last_line
            lines.append(cst.EmptyLine(whitespace=indent, comment=comment))
        lines.extend(whitespace.empty_lines)
    return layout.with_changes(first_line=head or layout.first_line, empty_lines=lines)


def _without_arg(call: cst.Call, index: int) -> cst.Call:
    """`call` without its argument `index`; the comments around it stay."""
    args = list(call.args)
    removed = args.pop(index)
    if isinstance(removed.comma, cst.Comma):
        trailing = removed.comma.whitespace_after
    else:
        trailing = removed.whitespace_after_arg
    if index == len(args) and args:
        last = args[-1]
        assert isinstance(last.comma, cst.Comma)
        if isinstance(removed.comma, cst.Comma):
            comma = last.comma.with_changes(
                whitespace_after=_joined(
                    last.comma.whitespace_after, trailing, layout_of_second=True
                )
            )
            args[-1] = last.with_changes(comma=comma)
        else:
            args[-1] = last.with_changes(
                comma=cst.MaybeSentinel.DEFAULT,
                whitespace_after_arg=_joined(
                    last.comma.whitespace_after, trailing, layout_of_second=True
                ),
            )
    elif index == 0:
        whitespace = _joined(
            call.whitespace_before_args, trailing, layout_of_second=False
        )
        return call.with_changes(args=args, whitespace_before_args=whitespace)
    else:
        before = args[index - 1]
        assert isinstance(before.comma, cst.Comma)
        comma = before.comma.with_changes(
            whitespace_after=_joined(
                before.comma.whitespace_after, trailing, layout_of_second=False
            )
        )
        args[index - 1] = before.with_changes(comma=comma)
    return call.with_changes(args=args)


def _comments(node: cst.CSTNode) -> list[cst.Comment]:
    """The comments inside `node`, in order."""
    found: list[cst.Comment] = []

    class _Collector(cst.CSTVisitor):
        def visit_Comment(self, comment: cst.Comment) -> None:
            found.append(comment)

    node.visit(_Collector())
    return found


@functools.cache
def _expression(code: str) -> cst.BaseExpression:
    """`code` parsed, once: libcst's nodes are immutable, so one serves all."""
    return cst.parse_expression(code)


class Rewriter(cst.CSTTransformer):
    """Applies a plan whose nodes are libcst's (`_analysis.Analysis`, or the
    plan of one statement, `_splice`); every node it was not told about is
    kept."""

    def __init__(self, analysis: Plan, names: Mapping[str, str]) -> None:
        super().__init__()
        self.analysis = analysis
        self.array_module = _expression(names["ArrayModule"])
        self.field_type = _expression(names["Field"])
        self.field_function = _expression(names["field"])

        # Comments of field calls dropped whole, to go above their statement.
        self._moved_comments: list[cst.Comment] = []

    def leave_SimpleStatementLine(
        self,
        original_node: cst.SimpleStatementLine,
        updated_node: cst.SimpleStatementLine,
    ) -> cst.SimpleStatementLine:
        if not self._moved_comments:
            return updated_node
        lines = [cst.EmptyLine(comment=comment) for comment in self._moved_comments]
        self._moved_comments = []
        return updated_node.with_changes(
            leading_lines=[*updated_node.leading_lines, *lines]
        )

    def leave_SimpleStatementSuite(
        self,
        original_node: cst.SimpleStatementSuite,
        updated_node: cst.SimpleStatementSuite,
    ) -> cst.SimpleStatementSuite:
        """`class A(eqx.Module): x: T = eqx.field(...)`: no line above, so the
        comments go at the end of the line."""
        if not self._moved_comments:
            return updated_node
        trailing = updated_node.trailing_whitespace
        texts = [comment.value for comment in self._moved_comments]
        if trailing.comment is not None:
            texts.insert(0, trailing.comment.value)
        self._moved_comments = []
        return updated_node.with_changes(
            trailing_whitespace=trailing.with_changes(
                whitespace=trailing.whitespace
                if trailing.comment is not None
                else cst.SimpleWhitespace("  "),
                comment=cst.Comment("  ".join(texts)),
            )
        )

    def on_leave(
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]:
        if original_node in self.analysis.expression_edits:
            return self.array_module
        return super().on_leave(original_node, updated_node)

    def _no_convert(self, value: cst.BaseExpression | None) -> cst.Call:
        """`value` (a default, `eqx.field(...)` or nothing) as an `af.field` call
        that also says `convert=False`."""
        if value is None:
            return cst.Call(func=self.field_function, args=[_no_convert_arg()])
        if (
            isinstance(value, cst.Call)
            and self.analysis.imports.resolve(value.func) in SPECIFIERS
        ):
            args = list(value.args)
            if args:
                args[-1] = _with_comma(args[-1])
            return value.with_changes(
                func=self.field_function, args=[*args, _no_convert_arg()]
            )
        return cst.Call(
            func=self.field_function,
            args=[_with_comma(_keyword_arg("default", value)), _no_convert_arg()],
        )

    def leave_ClassDef(
        self, original_node: cst.ClassDef, updated_node: cst.ClassDef
    ) -> cst.ClassDef:
        indices = self.analysis.base_edits.get(original_node)
        if not indices:
            return updated_node
        bases = list(updated_node.bases)
        for index in indices:
            bases[index] = bases[index].with_changes(value=self.array_module)
        return updated_node.with_changes(bases=bases)

    def leave_AnnAssign(
        self, original_node: cst.AnnAssign, updated_node: cst.AnnAssign
    ) -> cst.AnnAssign:
        edit = self.analysis.field_edits.get(original_node)
        if edit is FieldEdit.DROP_DEFAULT:
            if updated_node.value is not None:
                self._moved_comments.extend(_comments(updated_node.value))
            updated_node = updated_node.with_changes(
                value=None, equal=cst.MaybeSentinel.DEFAULT
            )
        elif edit is FieldEdit.NO_CONVERT:
            return updated_node.with_changes(
                value=self._no_convert(updated_node.value),
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(" "),
                    whitespace_after=cst.SimpleWhitespace(" "),
                ),
            )
        elif edit is FieldEdit.DROP_CONVERTER:
            call = updated_node.value
            assert isinstance(call, cst.Call)
            index = next(
                i
                for i, arg in enumerate(call.args)
                if arg.keyword is not None and arg.keyword.value == "converter"
            )
            updated_node = updated_node.with_changes(value=_without_arg(call, index))
        if original_node in self.analysis.wrap_annotations:
            annotation = updated_node.annotation
            updated_node = updated_node.with_changes(
                annotation=annotation.with_changes(
                    annotation=self._field_type_of(annotation.annotation)
                )
            )
        if original_node in self.analysis.wrap_defaults and updated_node.value:
            default = _keyword_arg("default", updated_node.value)
            updated_node = updated_node.with_changes(
                value=cst.Call(func=self.field_function, args=[default])
            )
        return updated_node

    def _field_type_of(self, annotation: cst.BaseExpression) -> cst.Subscript:
        """`af.Field[annotation]`, with `np.array` read as `np.ndarray` wherever
        it appears (in `Optional[...]`, in a string): a function is no type to a
        checker."""
        annotation = _legacy_as_ndarray(annotation, self.analysis.imports)
        return cst.Subscript(
            value=self.field_type,
            slice=[cst.SubscriptElement(slice=cst.Index(value=annotation))],
        )


class _LegacyAnnotations(cst.CSTTransformer):
    """`np.array` and `jnp.array` as `np.ndarray` and `jnp.ndarray`, strings too."""

    def __init__(self, imports: ImportMap) -> None:
        super().__init__()
        self.imports = imports

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.Attribute:
        if self.imports.resolve(original_node) in LEGACY_ANNOTATIONS:
            return updated_node.with_changes(attr=cst.Name("ndarray"))
        return updated_node

    def leave_SimpleString(
        self, original_node: cst.SimpleString, updated_node: cst.SimpleString
    ) -> cst.SimpleString:
        text = updated_node.evaluated_value
        if not isinstance(text, str) or text != updated_node.raw_value:
            return updated_node  # escapes: leave the string as written
        try:
            parsed = cst.parse_expression(text)
        except cst.ParserSyntaxError:
            return updated_node
        rewritten = parsed.visit(self)
        assert isinstance(rewritten, cst.BaseExpression)
        if rewritten is parsed or parsed.deep_equals(rewritten):
            return updated_node
        code = cst.Module(body=[]).code_for_node(rewritten)
        quote = updated_node.quote
        return updated_node.with_changes(
            value=f"{updated_node.prefix}{quote}{code}{quote}"
        )


def _legacy_as_ndarray(
    annotation: cst.BaseExpression, imports: ImportMap
) -> cst.BaseExpression:
    rewritten = annotation.visit(_LegacyAnnotations(imports))
    assert isinstance(rewritten, cst.BaseExpression)
    return rewritten


def _keyword_arg(keyword: str, value: cst.BaseExpression) -> cst.Arg:
    """`keyword=value`, spaced as PEP 8 asks."""
    return cst.Arg(
        value=value,
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""),
            whitespace_after=cst.SimpleWhitespace(""),
        ),
    )


def _no_convert_arg() -> cst.Arg:
    return _keyword_arg("convert", cst.Name("False"))


def _with_comma(arg: cst.Arg) -> cst.Arg:
    if isinstance(arg.comma, cst.Comma):
        return arg
    return arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
