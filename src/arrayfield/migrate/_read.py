"""The analysis of one file: a walk of its `ast` tree that finds the Module
classes and plans the rewrite (`base_edits`, `field_edits`...) and the
diagnostics, by running the rules of `_checks` on every field and call.
`_splice` writes the planned edits; nothing here changes the file.
"""

from __future__ import annotations

import ast
import functools
import tokenize
from collections.abc import Iterable, Iterator
from io import BytesIO
from typing import Any

from . import _diagnostics as diag
from . import _syntax as syntax
from ._annotations import ArrayKind, array_kind, is_class_var, is_field_wrapped
from ._bindings import ImportMap, has_block, nested_statements
from ._checks import (
    CALL_RULES,
    FIELD_RULES,
    af004_converter_kind,
    af009_unresolved_base,
    calls_matter,
)
from ._diagnostics import Diagnostic
from ._index import ClassContext, FileContext
from ._site import Assignment, FieldEdit, FieldSite
from ._syntax import dotted_name

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_DEFINITIONS = (ast.ClassDef, *_FUNCTIONS)
# Identifier characters, and brackets that end what a call's `(` follows.
_CALLEE_END = frozenset(
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_)]"
)
# Converters that make the array kind arrayfield makes for an annotation of
# that kind anyway: redundant under ArrayModule.
CONVERTER_KINDS: dict[str, ArrayKind] = {
    "jax.numpy.asarray": "jax",
    "jax.numpy.array": "jax",
    "numpy.asarray": "numpy",
    "numpy.array": "numpy",
}
# Field specifiers: their call, as a field's value, is not the field's default.
SPECIFIERS = frozenset({"equinox.field", "arrayfield.field", "dataclasses.field"})


def _is_cache(expr: Any) -> bool:
    """`@functools.cache`, `@lru_cache(maxsize=None)` and the like."""
    if isinstance(expr, ast.Call):
        expr = expr.func
    return (dotted_name(expr) or "").rpartition(".")[2] in ("cache", "lru_cache")


def _unsubscripted(expr: Any) -> Any:
    """`Parent` for the base `Parent[int]` of a generic class."""
    return expr.value if isinstance(expr, ast.Subscript) else expr


def _self_assignments(cls: ast.ClassDef) -> list[Assignment]:
    """`self.<attr> = value` statements in the methods, nested classes left out."""
    found: list[Assignment] = []
    for method in cls.body:
        if not (isinstance(method, _FUNCTIONS) and method.args.args):
            continue
        self_name = method.args.args[0].arg
        for statement in _outside_classes(method.body):
            if isinstance(statement, ast.Assign):
                targets = statement.targets
            elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
                targets = [statement.target]
            else:
                continue
            found += [
                (target.attr, statement.value, statement)
                for target in targets
                if isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == self_name
            ]
    return found


def _outside_classes(body: Iterable[ast.AST]) -> Iterator[ast.AST]:
    """The statements of a body at any depth, those of classes left out."""
    for node in body:
        if not isinstance(node, ast.ClassDef):
            yield node
            if has_block(node):
                yield from _outside_classes(nested_statements(node))


class AstAnalysis:
    """What to rewrite in one file and its diagnostics, and what a call rule asks."""

    def __init__(
        self,
        text: str,
        encoding: str,  # as detected: "utf-8-sig" after a BOM
        tree: ast.Module,
        context: FileContext | None,
        fix: bool,
        typed: bool,
    ) -> None:
        self.text = text
        self.encoding = encoding
        self.tree = tree
        # ast counts columns in UTF-8 bytes of the decoded text.
        self.lines = text.encode("utf-8").splitlines(keepends=True)
        self.imports = ImportMap.from_ast(tree, context.bindings if context else None)
        self.context = context
        self.fix = fix
        self.typed = typed
        # Field positions the project index read with `ast`.
        self.known_positions: dict[Any, tuple[int, int]] = {}
        self.module_classes: set[str] = set()
        # Module classes that derive from equinox's Module, not af.ArrayModule:
        # the rewrite changes what their fields hold.
        self.migrating_classes: set[str] = set()
        self.base_edits: dict[Any, list[int]] = {}
        self.field_edits: dict[Any, FieldEdit] = {}
        # Annotations to wrap in `af.Field[...]`, and bare defaults to write as
        # `af.field(default=...)` (what a type checker needs for that spelling).
        self.wrap_annotations: set[Any] = set()
        self.wrap_defaults: set[Any] = set()
        # `Base = eqx.Module` and the base in `type(name, (eqx.Module,), ns)`:
        # expressions that become a reference to ArrayModule.
        self.expression_edits: set[Any] = set()
        # Module-level names bound to equinox's Module by an assignment.
        self.module_aliases: set[str] = set()
        # Module-level names bound by one `name = value` statement, to that value
        # (None for a name bound more than once): what a field default names.
        self.module_values: dict[str, Any] = {}
        # Names whose last use may have been rewritten away (`eqx`, `jnp`...).
        self.released_names: set[str] = set()
        self.diagnostics: list[Diagnostic] = []
        # The enclosing class, named as arrayfield's runtime errors name it:
        # `Scene.Config`, the part up to a function's `<locals>` left out.
        self._scope: str | None = None
        # Inside a function: whether a cache decorator wraps it; None outside any.
        self.cached_function: bool | None = None

    # The walk.

    def walk(self, *, scan_calls: bool) -> None:
        """Every definition of the file, and with `scan_calls` every call."""
        for statement in self.tree.body:
            if isinstance(statement, ast.Assign):
                self._module_assignment(statement.targets, statement.value)
        self._walk(self.tree.body, scan_calls)
        if self.context is not None and self.context.unresolved:
            self.diagnostics += af009_unresolved_base.diagnostics(
                self.context.unresolved
            )

    def _walk(self, nodes: Iterable[ast.AST], scan_calls: bool) -> None:
        """Enters each definition before its decorators, bases and parameters."""
        for node in nodes:
            if isinstance(node, _DEFINITIONS):
                outer = self._scope, self.cached_function
                heads: list[ast.AST] = [*node.decorator_list]
                if isinstance(node, ast.ClassDef):
                    name = node.name
                    self._scope = name if outer[0] is None else f"{outer[0]}.{name}"
                    self._class(node, self._scope)
                    heads += [*node.bases, *node.keywords]
                else:
                    self._scope = None
                    self.cached_function = any(map(_is_cache, node.decorator_list))
                    heads += [node.args] + ([node.returns] if node.returns else [])
                self._walk(
                    [*heads, *node.body] if scan_calls else node.body, scan_calls
                )
                self._scope, self.cached_function = outer
            elif scan_calls:
                if isinstance(node, ast.Call):
                    self._call(node)
                self._walk(ast.iter_child_nodes(node), scan_calls)
            elif has_block(node):
                self._walk(nested_statements(node), scan_calls)

    # What the walk finds.

    def _module_assignment(self, targets: list[Any], value: Any) -> None:
        """A module-level `targets = value` statement: `Base = eqx.Module`."""
        for target in targets:
            bound = syntax.identifier(target)
            if bound is not None:
                seen = bound in self.module_values
                self.module_values[bound] = None if seen else value
        name = syntax.identifier(targets[0]) if len(targets) == 1 else None
        if name is not None and self._is_equinox_module(value):
            self.module_aliases.add(name)
            self.expression_edits.add(value)
            self._release(value)

    def _call(self, node: Any) -> None:
        """Migrate the bases of a `type(...)` Module class; run the call rules."""
        made = syntax.class_made_by_type(node)
        for base in [] if made is None else made[1]:
            if self._is_equinox_module(base):
                self.expression_edits.add(base)
                self._release(base)
        for rule in CALL_RULES:
            self.diagnostics.extend(rule.check_call(node, self))

    def _class(self, node: ast.ClassDef, qualname: str) -> None:
        bases = node.bases
        equinox_bases = [
            index for index, base in enumerate(bases) if self._is_equinox_module(base)
        ]
        written = [_unsubscripted(base) for base in bases]
        base_names = {dotted_name(base) for base in written}
        already_migrated = bool(base_names & self.module_classes) or any(
            self.imports.resolve(base) == "arrayfield.ArrayModule" for base in written
        )
        # A subclass of an alias such as `Base = eqx.Module`, or (known from the
        # project index) of a Module class defined in another module.
        aliased = bool(base_names & self.module_aliases)
        context = None if self.context is None else self.context.classes.get(qualname)
        if not (equinox_bases or already_migrated or aliased or context is not None):
            return
        self.module_classes.add(node.name)
        if (
            equinox_bases
            or aliased
            or base_names & self.migrating_classes
            or (context is not None and context.from_equinox)
        ):
            self.migrating_classes.add(node.name)
        if equinox_bases:
            self.base_edits[node] = equinox_bases
            for index in equinox_bases:
                self._release(bases[index])
        assignments = _self_assignments(node)
        for statement in node.body:
            if (
                isinstance(statement, ast.AnnAssign)
                and isinstance(statement.target, ast.Name)
                and not is_class_var(statement.annotation, self.imports)
            ):
                site = self._site(qualname, statement, assignments, context)
                self._field(site, bool(equinox_bases or already_migrated))

    def _site(
        self,
        qualname: str,
        statement: ast.AnnAssign,
        assignments: list[Assignment],
        context: ClassContext | None,
    ) -> FieldSite:
        call = self.specifier_call(statement.value)
        keywords = {}
        if call is not None:  # (`kw.arg` is None for a `**kwargs`)
            keywords = {kw.arg: kw.value for kw in call.keywords if kw.arg}
        converter = keywords.get("converter")
        return FieldSite(
            qualname,
            statement,
            call,
            assignments,
            context,
            self.context,
            self.imports,
            self.position,
            self.snippet,
            self.module_values,
            keywords,
            kind=array_kind(statement.annotation, self.imports),
            static=syntax.identifier(keywords.get("static")) == "True",
            opted_out=syntax.identifier(keywords.get("convert")) == "False",
            # A converter that makes arrays already keeps new values traced.
            makes_array=converter is not None and self._makes_array(converter),
            migrating=qualname.rpartition(".")[2] in self.migrating_classes,
        )

    def _field(self, site: FieldSite, drop_converters: bool) -> None:
        field, call, keywords = site.node, site.call, site.keywords
        if site.context is not None and site.name in site.context.fields:
            self.known_positions[field.target] = site.context.fields[site.name]
        converter = keywords.get("converter")
        found: dict[str, Diagnostic] = {}
        for rule in FIELD_RULES:
            diagnostic = rule.check_field(site, found)
            if diagnostic is None:
                continue
            found[rule.CODE] = diagnostic
            self.diagnostics.append(diagnostic)
            if (
                diagnostic.fixable
                and self.fix
                and not self._suppressed(diagnostic.line, diagnostic.code)
            ):
                self.field_edits[field] = rule.FIX
                if call is not None:
                    self._release(call.func)
        if site.kind is None or site.static:
            return
        if self.typed and not (site.opted_out or field in self.field_edits):
            # (the one edit planned so far is --fix's opt-out)
            self._wrap(site)
            if field.value is not None and call is None:
                self.wrap_defaults.add(field)
        if (
            call is None
            or converter is None
            or not drop_converters
            or field in self.field_edits
            or self.imports.resolve(call.func) != "equinox.field"
        ):
            return
        makes = CONVERTER_KINDS.get(self.imports.resolve(converter) or "")
        if makes is None:
            return
        keyword = next(kw for kw in call.keywords if kw.arg == "converter")
        mismatch = af004_converter_kind.check(site, keyword, makes, site.kind)
        if mismatch is not None:
            self.diagnostics.append(mismatch)
            return
        self._release(converter)
        # A type checker types the __init__ parameter from the converter: the
        # annotation that says the same thing takes its place.
        self._wrap(site)
        if len(call.args) + len(call.keywords) == 1:
            self.field_edits[field] = FieldEdit.DROP_DEFAULT
            self._release(call.func)
        else:
            self.field_edits[field] = FieldEdit.DROP_CONVERTER

    def _wrap(self, site: FieldSite) -> None:
        if not is_field_wrapped(site.annotation, self.imports):
            self.wrap_annotations.add(site.node)

    def _makes_array(self, converter: Any) -> bool:
        """Whether a converter is `jnp.asarray` or a kin, maybe in a `partial`."""
        if (
            isinstance(converter, ast.Call)
            and self.imports.resolve(converter.func) == "functools.partial"
            and converter.args
            # (a keyword never comes before a plain positional argument)
            and not isinstance(converter.args[0], ast.Starred)
        ):
            converter = converter.args[0]
        return self.imports.resolve(converter) in CONVERTER_KINDS

    def _release(self, expr: Any) -> None:
        """The name `expr` starts with (`eqx`) may have lost its last use."""
        dotted = dotted_name(expr)
        if dotted is not None:
            self.released_names.add(dotted.partition(".")[0])

    def _is_equinox_module(self, expr: Any) -> bool:
        # Or `from .core import Module` where core imports it from equinox.
        return self.imports.resolve(expr) == "equinox.Module" or (
            self.context is not None and dotted_name(expr) in self.context.equinox_bases
        )

    # What the rules and the writer ask.

    def module_base(self, expr: Any) -> bool:
        """Whether a base is equinox's Module, an alias of it or a Module class."""
        if self._is_equinox_module(expr):
            return True
        name = dotted_name(_unsubscripted(expr))
        return name in self.module_aliases or self.migrated_class(name)

    def migrated_class(self, name: str | None) -> bool:
        """Whether `name` is a Module class of the file or of the tree."""
        return name in self.module_classes or (
            self.context is not None and name in self.context.bases
        )

    def specifier_call(self, value: Any | None) -> Any | None:
        """`value` when it is a field specifier call (`eqx.field(...)`), else None."""
        if (
            isinstance(value, ast.Call)
            and self.imports.resolve(value.func) in SPECIFIERS
        ):
            return value
        return None

    def position(self, node: Any) -> tuple[int, int]:
        """Line and column (1-based) of `node`."""
        known = self.known_positions.get(node)
        if known is not None:
            return known
        prefix = self.lines[node.lineno - 1][: node.col_offset]
        return node.lineno, len(prefix.decode("utf-8", errors="replace")) + 1

    def snippet(self, node: Any) -> str:
        """The node's source on one line, cut to 40 characters, with the brackets
        written around it (`ast` leaves them out of its position)."""
        first, last = self.lines[node.lineno - 1], self.lines[node.end_lineno - 1]
        chunk = b"".join(self.lines[node.lineno - 1 : node.end_lineno])
        end = len(chunk) - len(last) + node.end_col_offset
        text = chunk[node.col_offset : end].decode()
        before = first[: node.col_offset].rstrip(b" \t")
        after = last[node.end_col_offset :].lstrip(b" \t")
        while before.endswith(b"(") and after.startswith(b")"):
            callee = before[:-1].rstrip(b" \t")
            if callee and callee[-1] in _CALLEE_END:
                break  # the bracket of a call
            text, before, after = f"({text})", callee, after[1:].lstrip(b" \t")
        text = " ".join(text.split())
        return text if len(text) <= 40 else text[:37] + "..."

    @property
    def changes(self) -> bool:
        """Whether the rewrite edits the file: a base, an alias, a field."""
        return bool(
            self.base_edits
            or self.expression_edits
            or self.wrap_annotations
            or self.field_edits
            or self.wrap_defaults
        )

    def names_needed(self) -> list[str]:
        """Which of `ArrayModule`, `Field` and `field` the new code refers to."""
        no_convert = FieldEdit.NO_CONVERT in self.field_edits.values()
        return [
            name
            for name, edits in (
                ("ArrayModule", self.base_edits or self.expression_edits),
                ("Field", self.wrap_annotations),
                ("field", self.wrap_defaults or no_convert),
            )
            if edits
        ]

    def reported(self) -> tuple[Diagnostic, ...]:
        """The diagnostics no `# noqa` silences, sorted by position."""
        return tuple(
            sorted(d for d in self.diagnostics if not self._suppressed(d.line, d.code))
        )

    def _suppressed(self, line: int, code: str) -> bool:
        """Whether `# noqa` on `line` silences `code`: a silenced fix is not made."""
        return diag.suppressed(self._source_lines, line, code)

    @functools.cached_property
    def _source_lines(self) -> list[str]:
        return diag.source_lines(self.text)


def analyse_source(
    source: bytes | str,
    context: FileContext | None = None,
    *,
    fix: bool = False,
    typed: bool = False,
    tree: ast.Module | None = None,
) -> AstAnalysis:
    """The plan of `source`'s migration, from its parse `tree` if given. Bytes
    are decoded as Python would (PEP 263). Raises `SyntaxError`, `ValueError`
    (null bytes), `UnicodeDecodeError` or `LookupError` (an unknown coding)."""
    if isinstance(source, str):
        encoding, text = "utf-8", source
    else:
        encoding, _ = tokenize.detect_encoding(BytesIO(source).readline)
        text = source.decode(encoding)
    if tree is None:
        tree = ast.parse(text)
    analysis = AstAnalysis(text, encoding, tree, context, fix, typed)
    analysis.walk(scan_calls=calls_matter(text))
    return analysis
