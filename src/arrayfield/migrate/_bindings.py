"""Which names a file's import statements bind.

Resolution is per file and ignores shadowing: a codemod only needs to recognise
`eqx.Module`, `jnp.asarray`, `Float[...]` and friends in the spellings people
write, and a file that rebinds `eqx` to something else is out of scope.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable
from typing import Any

from ._names import dotted_name

# Where statements nest, in source order.
NESTED_BODIES = ("body", "orelse", "handlers", "finalbody", "cases")


# The fields of NESTED_BODIES each node class has (most have none), found once
# per class: a large file asks for a million nodes' bodies.
_BODIES_OF: dict[type, tuple[str, ...]] = {}


def nested_statements(node: ast.AST) -> Iterable[ast.AST]:
    """The statements (and handlers, cases) directly inside a compound statement."""
    names = _BODIES_OF.get(type(node))
    if names is None:
        fields = type(node)._fields
        names = _BODIES_OF[type(node)] = tuple(n for n in NESTED_BODIES if n in fields)
    for name in names:
        nested = getattr(node, name)
        if isinstance(nested, list):
            yield from nested


@dataclasses.dataclass(frozen=True)
class ImportMap:
    """Local names bound by import statements, mapped to what they refer to.

    `import jax.numpy as jnp` gives ``{"jnp": "jax.numpy"}``,
    `from equinox import Module as M` gives ``{"M": "equinox.Module"}``.

    **Fields:**

    - `bindings`: the imports anywhere in the file, for reading names: a class
        in a function that imports equinox locally is still a Module class.
    - `module_level`: the imports written directly in the module body, which
        run before any code below them. Only these can be reused for new code;
        one under `if TYPE_CHECKING:`, in a `try` block or in a function may not
        have run, or binds a name that module-level code cannot see.
    """

    bindings: dict[str, str]
    module_level: dict[str, str]

    @classmethod
    def from_ast(cls, tree: ast.Module) -> ImportMap:
        """The imports of an `ast` module."""
        everywhere: dict[str, str] = {}
        for statement in imports_in(tree.body):
            _bind(statement, everywhere)
        module_level: dict[str, str] = {}
        for statement in tree.body:
            if isinstance(statement, ast.Import | ast.ImportFrom):
                _bind(statement, module_level)
        return cls(everywhere, module_level)

    def resolve(self, expr: Any) -> str | None:
        """The qualified name an expression such as `eqx.Module` refers to."""
        dotted = dotted_name(expr)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        target = self.bindings.get(head)
        if target is None:
            return None
        return f"{target}.{rest}" if rest else target

    def local_name_for(self, qualified: str) -> str | None:
        """An expression, as source text, that refers to `qualified` in this file.

        `arrayfield.ArrayModule` is found as `ArrayModule` after
        `from arrayfield import ArrayModule`, or as `af.ArrayModule` after
        `import arrayfield as af`; only module-level imports count.
        """
        module, _, attr = qualified.rpartition(".")
        for local, target in self.module_level.items():
            if target == qualified:
                return local
        for local, target in self.module_level.items():
            if target == module:
                return f"{local}.{attr}"
        return None


def imports_in(body: Iterable[Any]) -> Iterable[ast.Import | ast.ImportFrom]:
    """The import statements of a body at any depth, in source order."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        yield from imports_in(nested_statements(node))


def bound_name(alias: ast.alias, statement: ast.Import | ast.ImportFrom) -> str:
    """The local name an import binds: `jnp` for `import jax.numpy as jnp`,
    `jax` for `import jax.numpy`, `Module` for `from equinox import Module`."""
    if alias.asname is not None:
        return alias.asname
    return alias.name.split(".")[0] if isinstance(statement, ast.Import) else alias.name


def _bind(statement: ast.Import | ast.ImportFrom, bindings: dict[str, str]) -> None:
    if isinstance(statement, ast.Import):
        for alias in statement.names:
            local = bound_name(alias, statement)
            bindings[local] = alias.name if alias.asname is not None else local
        return
    if statement.level or statement.module is None:
        return
    for alias in statement.names:
        if alias.name == "*":
            return
        bindings[bound_name(alias, statement)] = f"{statement.module}.{alias.name}"
