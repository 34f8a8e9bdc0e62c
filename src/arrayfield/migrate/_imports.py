"""Which names a file imports, and adding or dropping import statements.

Resolution is per file and ignores shadowing: a codemod only needs to recognise
`eqx.Module`, `jnp.asarray`, `Float[...]` and friends in the spellings people
write, and a file that rebinds `eqx` to something else is out of scope. Reusing
an import is different: the rewritten code runs at import time, so only a
module-level import that always runs can be reused, and a new name is bound only
where it cannot change what another reference in the file means.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TypeVar

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import ImportAssignment, MetadataWrapper, ScopeProvider

from ._bindings import ImportMap
from ._lint import STDLIB
from ._statements import small_statements

_Item = TypeVar("_Item", cst.ImportAlias, cst.BaseSmallStatement, cst.Arg)

# What `used_names` reads as names in a string literal.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def binding_name(alias: cst.ImportAlias) -> str:
    """The local name an import alias binds: `jnp` for `import jax.numpy as jnp`,
    `jax` for `import jax.numpy`."""
    if alias.asname is not None:
        return get_full_name_for_node(alias.asname.name) or ""
    full = get_full_name_for_node(alias.name) or ""
    return full.split(".")[0]


def import_map(module: cst.Module) -> ImportMap:
    """The imports of a libcst module, as `ImportMap.from_ast` reads an `ast` one."""
    everywhere = _ImportCollector()
    for small in small_statements(module.body):
        if isinstance(small, (cst.Import, cst.ImportFrom)):
            small.visit(everywhere)
    unconditional = _ImportCollector()
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                small.visit(unconditional)
    return ImportMap(everywhere.bindings, unconditional.bindings)


class _ImportCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        self.bindings: dict[str, str] = {}

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            full = get_full_name_for_node(alias.name) or ""
            local = binding_name(alias)
            self.bindings[local] = full if alias.asname is not None else local
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if (
            node.relative
            or node.module is None
            or isinstance(node.names, cst.ImportStar)
        ):
            return False
        module = get_full_name_for_node(node.module) or ""
        for alias in node.names:
            name = get_full_name_for_node(alias.name) or ""
            self.bindings[binding_name(alias)] = f"{module}.{name}"
        return False


def _import_target(node: cst.CSTNode, name: str) -> str | None:
    """What the import statement `node` binds `name` to."""
    collector = _ImportCollector()
    node.visit(collector)
    return collector.bindings.get(name)


def can_bind(
    wrapper: MetadataWrapper, name: str, qualified: str, source: str | None = None
) -> bool:
    """Whether a module-level import binding `name` to `qualified` leaves every
    other reference in the file meaning what it meant.

    True when the file binds `name` nowhere, or only by importing `qualified`
    itself (under `if TYPE_CHECKING:`, in a function...), and every use of it
    resolves to such an import. Any other binding, in any scope, or a use that
    resolves to nothing (a star import may provide it), makes it False.

    `source`, the module's text, answers at once for a file where `name` is no
    word at all, the usual case: the scope analysis it saves is a third of the
    time `--diff` spends on a large file.
    """
    if source is not None and not re.search(rf"(?<!\w){re.escape(name)}(?!\w)", source):
        return True
    for scope in set(wrapper.resolve(ScopeProvider).values()):
        if scope is None:
            continue
        for assignment in scope.assignments[name]:
            if not (
                isinstance(assignment, ImportAssignment)
                and _import_target(assignment.node, name) == qualified
            ):
                return False
        if any(not access.referents for access in scope.accesses[name]):
            return False
    return True


class _NameCollector(cst.CSTVisitor):
    """Every identifier the code uses outside import statements.

    Identifiers inside string literals count too (string annotations,
    `__all__`), so an import stays whenever a string might still need it.
    """

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self.names.update(IDENTIFIER.findall(node.value))


def used_names(node: cst.CSTNode) -> set[str]:
    """The identifiers `node` uses as names or in strings, imports aside."""
    collector = _NameCollector()
    node.visit(collector)
    return collector.names


def _drop(items: Sequence[_Item], keep: Sequence[bool], separator: str) -> list[_Item]:
    """`items` where `keep` is true, moving the removed last item's separator
    (comma or semicolon) onto the new last item so no stray comma is left."""
    kept = [item for item, flag in zip(items, keep, strict=True) if flag]
    if kept and not keep[-1]:
        kept[-1] = kept[-1].with_changes(**{separator: getattr(items[-1], separator)})
    return kept


def _import_lines_in(body: Sequence[cst.BaseStatement]) -> Iterable[int]:
    for index, statement in enumerate(body):
        if isinstance(statement, cst.SimpleStatementLine) and any(
            isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
        ):
            yield index


class _UnusedImportRemover(cst.CSTTransformer):
    def __init__(self, removable: set[str]) -> None:
        self.removable = removable

    def on_visit(self, node: cst.CSTNode) -> bool:
        # Import lines are pruned from the bodies that hold them (`leave_Module`,
        # `leave_IndentedBlock`): nothing inside an expression or a simple
        # statement line, most of a file's nodes, needs visiting.
        if isinstance(node, cst.BaseExpression | cst.SimpleStatementLine):
            return False
        return super().on_visit(node)

    def _prune_small(
        self, small: cst.BaseSmallStatement
    ) -> cst.BaseSmallStatement | None:
        if not isinstance(small, (cst.Import, cst.ImportFrom)) or isinstance(
            small.names, cst.ImportStar
        ):
            return small
        keep = [binding_name(alias) not in self.removable for alias in small.names]
        if all(keep):
            return small
        if not any(keep):
            return None
        return small.with_changes(names=_drop(small.names, keep, "comma"))

    def _prune(
        self, statement: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine | None:
        pruned = [self._prune_small(small) for small in statement.body]
        keep = [small is not None for small in pruned]
        if not any(keep):
            return None
        merged = [new or old for old, new in zip(statement.body, pruned, strict=True)]
        return statement.with_changes(body=_drop(merged, keep, "semicolon"))

    def _prune_body(self, body: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
        pruned: list[cst.BaseStatement] = []
        orphaned_lines: list[cst.EmptyLine] = []
        import_lines = set(_import_lines_in(body))
        for index, statement in enumerate(body):
            if index in import_lines:
                assert isinstance(statement, cst.SimpleStatementLine)
                new = self._prune(statement)
                if new is None:
                    # Keep the comments and blank lines that stood above it.
                    orphaned_lines.extend(statement.leading_lines)
                    continue
                statement = new
            if orphaned_lines:
                # Every statement is one of these two; BaseStatement itself does not
                # declare leading_lines.
                assert isinstance(
                    statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)
                )
                own = list(statement.leading_lines)
                if any(line.comment is None for line in own):
                    # It is separated already: more blank lines would be a
                    # formatting change (isort wants two before a class).
                    orphaned_lines = [
                        line for line in orphaned_lines if line.comment is not None
                    ]
                statement = statement.with_changes(
                    leading_lines=[*orphaned_lines, *own]
                )
                orphaned_lines = []
            pruned.append(statement)
        return pruned

    def leave_Module(
        self, original_node: cst.Module, updated_node: cst.Module
    ) -> cst.Module:
        return updated_node.with_changes(body=self._prune_body(updated_node.body))

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        body = self._prune_body(updated_node.body)
        if not body:
            # A block of nothing but these imports (`try: import equinox`): keep
            # them rather than leave a `pass` behind, marked as kept on purpose
            # so that pyflakes and ruff do not report them unused (F401).
            return updated_node.with_changes(
                body=[_marked_kept(statement) for statement in updated_node.body]
            )
        return updated_node.with_changes(body=body)


def _marked_kept(statement: cst.BaseStatement) -> cst.BaseStatement:
    """An import line that stays unused, with `# noqa: F401` (unless it has a
    comment already)."""
    if (
        not isinstance(statement, cst.SimpleStatementLine)
        or statement.trailing_whitespace.comment is not None
    ):
        return statement
    return statement.with_changes(
        trailing_whitespace=statement.trailing_whitespace.with_changes(
            whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment("# noqa: F401")
        )
    )


def remove_unused_imports(module: cst.Module, candidates: set[str]) -> cst.Module:
    """Drop the imports binding a name in `candidates` that nothing uses any more.

    Only names the codemod itself stopped using are candidates, so an import
    that was already unused before the rewrite stays where it is.

    Not libcst's `RemoveImportsVisitor`, which needs scope metadata computed
    over the rewritten module (a second full analysis of every rewritten file),
    drops the comments and blank lines above an import it removes, and leaves
    `try: pass` where a guarded import was; this keeps both as they were.
    """
    return remove_imports(module, candidates - used_names(module))


def remove_imports(module: cst.Module, names: set[str]) -> cst.Module:
    """Drop the imports binding a name in `names`, at any depth, keeping the
    comments above them (see `remove_unused_imports`)."""
    if not names:
        return module
    return module.visit(_UnusedImportRemover(names))


# isort's sections, in the order isort and ruff's `I` rules write them.
_SECTIONS = ("future", "stdlib", "third-party", "first-party", "local")


def _section(statement: cst.BaseStatement, first_party: frozenset[str]) -> int | None:
    """The section index of a module-level import statement, else None."""
    if not (
        isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
    ):
        return None
    small = statement.body[0]
    if isinstance(small, cst.Import):
        module = get_full_name_for_node(small.names[0].name) or ""
    elif isinstance(small, cst.ImportFrom):
        if small.relative:
            return _SECTIONS.index("local")
        module = get_full_name_for_node(small.module) if small.module else ""
        module = module or ""
    else:
        return None
    return _section_of(module, first_party)


def _section_of(module: str, first_party: frozenset[str]) -> int:
    top = module.partition(".")[0]
    if top == "__future__":
        return _SECTIONS.index("future")
    if top in first_party:
        return _SECTIONS.index("first-party")
    if top in STDLIB:
        return _SECTIONS.index("stdlib")
    return _SECTIONS.index("third-party")


def _sort_key(statement: cst.SimpleStatementLine) -> tuple[int, str]:
    """isort's order within a section: `import x` lines before `from x import`
    lines, each by module name, ignoring case."""
    small = statement.body[0]
    if isinstance(small, cst.Import):
        return 0, (get_full_name_for_node(small.names[0].name) or "").lower()
    assert isinstance(small, cst.ImportFrom)
    module = get_full_name_for_node(small.module) if small.module else ""
    return 1, (module or "").lower()


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(
            statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString)
        )
    )


def add_import(
    module: cst.Module, code: str, first_party: frozenset[str] = frozenset()
) -> cst.Module:
    """Insert the statement `code` (``import arrayfield as af``) where isort and
    ruff's `I` rules would put it.

    In the file's first block of imports: in the section of `arrayfield`
    (third-party, unless `first_party` names it), before the first statement
    of that section that sorts after it, taking over the comments and blank
    lines above that statement; a section of its own, between blank lines, if
    the file has none. Without imports it goes after the leading docstring.
    """
    body = list(module.body)
    new = cst.parse_statement(code + module.default_newline)
    assert isinstance(new, cst.SimpleStatementLine)
    start = 1 if body and _is_docstring(body[0]) else 0
    block: list[tuple[int, int]] = []  # (index in body, section)
    for index in range(start, len(body)):
        section = _section(body[index], first_party)
        if section is None:
            break
        block.append((index, section))
    if not block:
        if start == 1:
            # Only a docstring above: separate the import from it like isort does.
            new = new.with_changes(leading_lines=[cst.EmptyLine()])
        body.insert(start, new)
        return module.with_changes(body=body)

    mine = _section_of("arrayfield", first_party)
    key = _sort_key(new)
    same = [(index, section) for index, section in block if section == mine]
    for index, section in block:
        statement = body[index]
        assert isinstance(statement, cst.SimpleStatementLine)
        if section < mine or (section == mine and _sort_key(statement) < key):
            continue
        if section == mine or not same:
            # Before it, in its place: it keeps the lines above, the new one
            # takes them; a new section also needs a blank line after it.
            lines = [cst.EmptyLine()] if section != mine else []
            body[index] = statement.with_changes(leading_lines=lines)
            body.insert(index, new.with_changes(leading_lines=statement.leading_lines))
            return module.with_changes(body=body)
        break
    last = same[-1][0] if same else block[-1][0]
    leading = [] if same else [cst.EmptyLine()]
    body.insert(last + 1, new.with_changes(leading_lines=leading))
    return module.with_changes(body=body)
