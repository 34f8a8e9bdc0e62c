"""Which names a file's import statements bind, and the walk over its
statements that finds them. Shadowing is ignored: a codemod only needs to
recognise `eqx.Module`, `jnp.asarray` and friends as people spell them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from ._syntax import dotted_name

# Where statements nest, in source order.
NESTED_BODIES = ("body", "orelse", "handlers", "finalbody", "cases")
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# The fields of NESTED_BODIES each node class has (most have none), found once
# per class: a large file asks for a million nodes' bodies.
_BODIES_OF: dict[type, tuple[str, ...]] = {}


def _bodies_of(kind: type) -> tuple[str, ...]:
    _BODIES_OF[kind] = tuple(n for n in NESTED_BODIES if n in kind._fields)
    return _BODIES_OF[kind]


def has_block(node: ast.AST) -> bool:
    """Whether a statement holds others (a block, handlers, cases)."""
    names = _BODIES_OF.get(type(node))
    return bool(_bodies_of(type(node)) if names is None else names)


def nested_statements(node: ast.AST) -> Iterable[ast.AST]:
    """The statements (and handlers, cases) directly inside a compound statement."""
    names = _BODIES_OF.get(type(node))
    if names is None:
        names = _bodies_of(type(node))
    for name in names:
        nested = getattr(node, name)
        if isinstance(nested, list):
            yield from nested


class ImportMap(NamedTuple):
    """Local names bound by import statements, mapped to what they refer to
    (`import jax.numpy as jnp`: `{"jnp": "jax.numpy"}`)."""

    # Anywhere in the file, for reading names: a class in a function that
    # imports equinox locally is still a Module class.
    bindings: dict[str, str]
    # Directly in the module body: only these may be reused by new code (one
    # under `if TYPE_CHECKING:`, in a `try` or a function may not have run).
    module_level: dict[str, str]

    @classmethod
    def from_ast(
        cls, tree: ast.Module, everywhere: dict[str, str] | None = None
    ) -> ImportMap:
        """The imports of a module; `everywhere`, its `bindings` if found already."""
        if everywhere is None:
            everywhere = {}
            for statement in imports_in(tree.body):
                bind(statement, everywhere)
        module_level: dict[str, str] = {}
        for statement in tree.body:
            if isinstance(statement, ast.Import | ast.ImportFrom):
                bind(statement, module_level)
        return cls(everywhere, module_level)

    def resolve(self, expr: Any) -> str | None:
        """The qualified name an expression such as `eqx.Module` refers to."""
        head, _, rest = (dotted_name(expr) or "").partition(".")
        target = self.bindings.get(head)
        if target is None:
            return None
        return f"{target}.{rest}" if rest else target

    def local_name_for(self, qualified: str) -> str | None:
        """Source text naming `qualified` through a module-level import
        (`ArrayModule`, or `af.ArrayModule` after `import arrayfield as af`)."""
        module, _, attr = qualified.rpartition(".")
        for local, target in self.module_level.items():
            if target == qualified:
                return local
        for local, target in self.module_level.items():
            if target == module:
                return f"{local}.{attr}"
        return None


def statements_in(
    body: Iterable[ast.AST], *, into_definitions: bool = True
) -> Iterator[ast.AST]:
    """Every statement of a body and its blocks (handlers and cases too), in
    order; not inside functions and classes without `into_definitions`.
    Iterative: a recursive generator pays a frame per statement."""
    pending = [iter(body)]
    while pending:
        for node in pending[-1]:
            yield node
            if has_block(node) and (
                into_definitions or not isinstance(node, _DEFINITIONS)
            ):
                pending.append(iter(nested_statements(node)))
                break
        else:
            pending.pop()


def imports_in(body: Iterable[Any]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of a body at any depth, in source order."""
    for node in statements_in(body):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def bound_name(alias: ast.alias, statement: ast.Import | ast.ImportFrom) -> str:
    """The local name an import binds: `jnp` for `import jax.numpy as jnp`,
    `jax` for `import jax.numpy`, `Module` for `from equinox import Module`."""
    if alias.asname is not None:
        return alias.asname
    return alias.name.split(".")[0] if isinstance(statement, ast.Import) else alias.name


def bind(
    statement: ast.Import | ast.ImportFrom,
    bindings: dict[str, str],
    module: str | None = None,
) -> None:
    """Add the names an import binds to `bindings`; a relative one's only given
    `module`, the absolute name of the module it imports from."""
    if isinstance(statement, ast.Import):
        for alias in statement.names:
            local = bound_name(alias, statement)
            bindings[local] = alias.name if alias.asname is not None else local
        return
    if module is None:
        if statement.level or statement.module is None:
            return
        module = statement.module
    for alias in statement.names:
        if alias.name != "*":
            bindings[bound_name(alias, statement)] = f"{module}.{alias.name}"
