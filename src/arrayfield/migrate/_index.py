"""The project index: every file's facts (`_facts`), with names resolved across
modules (imports, `as`, re-exports through `__init__.py`, aliases such as
`Base = eqx.Module`), so that the per-file rewrite knows every descendant of
`eqx.Module`, wherever it is defined, and what its subclasses do with its fields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache, cached_property
from pathlib import Path
from typing import NamedTuple, TypeVar

from ._facts import (
    ARRAY_BUILDERS,
    BUILT,
    OBJECT,
    SHAPE_VALUE,
    ClassFacts,
    FileFacts,
    resolved_path,
)
from ._lint import STDLIB, LintConfig

_EQUINOX_MODULE = frozenset({"equinox.Module", "equinox._module.Module"})
# What every Module class descends from.
ROOTS = _EQUINOX_MODULE | {"arrayfield.ArrayModule"}
# Bases whose subclasses compare (and hash) by value, or are singletons.
_VALUE_BASES = frozenset(
    {"tuple", "str", "int", "float", "bytes", "frozenset"}
    | {"typing.NamedTuple", "typing_extensions.NamedTuple"}
    | {f"enum.{name}" for name in ("Enum", "IntEnum", "StrEnum", "Flag", "IntFlag")}
)
# Classes from these packages are pytrees or arrays (jax.tree_util.Partial,
# optax states...), not opaque objects hashed by identity.
_PYTREE_PACKAGES = frozenset(
    {"jax", "jaxlib", "equinox", "numpy", "jaxtyping", "arrayfield", "optax"}
)
# The standard library's classes that JAX registers as pytree nodes.
_STDLIB_PYTREES = frozenset({"collections.OrderedDict", "collections.defaultdict"})
# How many directories without `__init__.py` above a package may be namespace
# packages (`src/acme/`), below `src/` or a directory with one of `_TOP_MARKERS`.
_NAMESPACE_DEPTH = 2
_TOP_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


class _SubtreeUses:
    """What a class and its descendants do with attributes (see `ClassContext`)."""

    def __init__(self) -> None:
        self.uses: dict[str, dict[str, str]] = {}
        self.assigns: dict[str, dict[str, str]] = {}
        self.objects: dict[str, str] = {}
        self.maybe_pytree: set[str] = set()
        self.helpers: dict[str, str] = {}
        # The most positional arguments a call of one of these classes passes.
        self.reached: float = 0

    def absorb(self, later: _SubtreeUses) -> None:
        """Add what `later` found where nothing was found yet: the first wins."""
        for table, theirs in ((self.uses, later.uses), (self.assigns, later.assigns)):
            for attr, kinds in theirs.items():
                mine = table.setdefault(attr, {})
                for kind, where in kinds.items():
                    mine.setdefault(kind, where)
        for attr, called in later.objects.items():
            self.objects.setdefault(attr, called)
        for attr, function in later.helpers.items():
            self.helpers.setdefault(attr, function)
        self.maybe_pytree |= later.maybe_pytree
        self.reached = max(self.reached, later.reached)


class _Lineage(NamedTuple):
    """What a class inherits, through the tree's classes up to the first outside it."""

    module: bool = False  # it descends from one of `ROOTS`
    from_equinox: bool = False  # from equinox's Module, not through af.ArrayModule
    init: bool = False  # an `__init__` of the tree is in its MRO
    by_value: bool = False  # a dataclass, an `__eq__`, or one of `_VALUE_BASES`


class ClassContext(NamedTuple):
    """What the per-file rewrite needs to know about one Module class."""

    # Attribute -> kind -> `path:line` of its first such use or assignment, in
    # the class or a subclass.
    uses: dict[str, dict[str, str]]
    assigns: dict[str, dict[str, str]]
    objects: dict[str, str]  # attribute -> the class instantiated into it
    init_from_args: bool  # no `__init__` in the MRO
    fields: dict[str, tuple[int, int]]
    maybe_pytree: frozenset[str]  # objects of a class outside the tree
    helpers: dict[str, str]  # attribute -> function whose list of ints it gets
    from_equinox: bool  # see `_Lineage`
    constants: frozenset[str]  # own fields nothing in the project may set


class FileContext(NamedTuple):
    """The project's knowledge about one file, passed to `migrate_source`."""

    classes: dict[str, ClassContext]
    tree_at: dict[str, str]  # attribute -> `path:line` of an eqx.tree_at of it
    # The file's names for the tree's classes that are not Modules and compare
    # by identity, and for its Module classes.
    plain_classes: frozenset[str] = frozenset()
    bases: frozenset[str] = frozenset()
    # Names as written (`core.Module`): equinox's Module through other modules.
    equinox_bases: frozenset[str] = frozenset()
    exported: frozenset[str] = frozenset()  # imported by others: their imports stay
    lint: LintConfig = LintConfig()  # the tree's own packages are first-party
    bindings: dict[str, str] | None = None  # `FileFacts.bindings`
    unresolved: tuple[tuple[int, str, str], ...] = ()  # `unresolved_bases`


_Value = TypeVar("_Value")


def _namespace_prefixes(root: Path) -> list[str]:
    """The names namespace packages may put before the modules under an import
    root, nearest first: `acme` for `src/acme/`, then `src.acme`."""
    prefixes: list[str] = []
    for directory in [root, *root.parents][:_NAMESPACE_DEPTH]:
        if (
            (directory / "__init__.py").is_file()
            or directory.name == "src"
            or any((directory / marker).exists() for marker in _TOP_MARKERS)
        ):
            break
        outer = directory.name
        prefixes.append(f"{outer}.{prefixes[-1]}" if prefixes else outer)
    return prefixes


def _fold(
    start: str,
    memo: dict[str, _Value],
    neighbours: Callable[[str], list[str]],
    combine: Callable[[str, list[_Value]], _Value],
) -> _Value:
    """`memo[start]`, each class's value `combine`d from its `neighbours`' (bases
    or subclasses), in order. Without recursion: a chain of subclasses is deeper
    than Python's stack. A cycle of bases is cut where it leads back."""
    stack = [(start, False)]
    entered: set[str] = set()
    while stack:
        name, neighbours_done = stack.pop()
        if name in memo:
            continue
        if not neighbours_done:
            if name not in entered:
                entered.add(name)
                stack.append((name, True))
                stack += [
                    (other, False)
                    for other in reversed(neighbours(name))
                    if other not in entered
                ]
            continue
        found = [memo[other] for other in neighbours(name) if other in memo]
        memo[name] = combine(name, found)
    return memo[start]


class ProjectIndex:
    """Every indexed file, with bases resolved across modules."""

    def __init__(self, files: Iterable[FileFacts]) -> None:
        self.files = {facts.path: facts for facts in files}
        # Module names are unique within one import root, not across roots
        # (`migrate scripts tools` may see two `models.py`): a top-level name
        # under several roots is keyed `models#<root>`, and an import resolves
        # under its own file's root (as sys.path[0]), else `src/`, else the first.
        self._root: dict[str, Path] = {}
        roots_of_top: dict[str, set[Path]] = {}
        for facts in self.files.values():
            depth = facts.module.count(".") + 1 + facts.is_package
            root = resolved_path(Path(facts.path)).parents[depth - 1]
            self._root[facts.path] = root
            roots_of_top.setdefault(facts.module.partition(".")[0], set()).add(root)
        self._roots_of_top = {
            top: sorted(roots, key=lambda root: (root.name != "src", str(root)))
            for top, roots in roots_of_top.items()
            if len(roots) > 1
        }
        self.modules = {self.key(facts): facts for facts in self.files.values()}
        # PEP 420 namespace packages: `src/acme/models/base.py` without
        # `src/acme/__init__.py` is `models.base` and also `acme.models.base`.
        self._namespace: dict[str, FileFacts] = {}
        prefixes = cache(_namespace_prefixes)  # asked once per root
        for facts in self.files.values():
            for prefix in prefixes(self._root[facts.path]):
                name = f"{prefix}.{facts.module}"
                if name not in self.modules:
                    self._namespace.setdefault(name, facts)
        # Each class's bases and each field's types are asked for again and
        # again (per class, per subclass, per round of the index).
        self._qualified: dict[tuple[str, str], str | None] = {}
        self._class_facts: dict[str, tuple[FileFacts, ClassFacts] | None] = {}
        self._lineages: dict[str, _Lineage] = {}
        self._subtrees: dict[str, _SubtreeUses] = {}

    def top_level_modules(self) -> frozenset[str]:
        """The project's own top-level packages and modules: first-party to isort."""
        return frozenset(
            facts.module.partition(".")[0] for facts in self.files.values()
        )

    def key(self, facts: FileFacts) -> str:
        """The file's module name, made unique across import roots."""
        return self._rooted(facts.module, self._root[facts.path])

    def _rooted(self, name: str, root: Path) -> str:
        """`name` (`models.base.Grid`) as imported by a file under `root`."""
        top, dot, rest = name.partition(".")
        roots = self._roots_of_top.get(top)
        if roots is None:
            return name
        chosen = root if root in roots else roots[0]
        return f"{top}#{roots.index(chosen)}{dot}{rest}"

    def _locate(self, qualified: str) -> tuple[FileFacts, str] | None:
        """The module the longest prefix of a name names, and the rest of it."""
        parts = qualified.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            facts = self._module(module)
            if facts is not None:
                return facts, ".".join(parts[cut:])
        return None

    def _module(self, name: str) -> FileFacts | None:
        """The file of a module name, or of its namespace-package spelling."""
        return self.modules.get(name) or self._namespace.get(name)

    def qualify(self, facts: FileFacts, name: str) -> str | None:
        """The qualified name a dotted name written in `facts`'s file refers to."""
        key = (facts.path, name)
        if key not in self._qualified:
            self._qualified[key] = self._qualify(facts, name, 0)
        return self._qualified[key]

    def _qualify(self, facts: FileFacts, name: str, depth: int) -> str | None:
        head, _, rest = name.partition(".")
        if head in facts.classes or head in facts.int_list_functions:
            target: str | None = f"{self.key(facts)}.{head}"
        elif head in facts.imports:
            target = self._rooted(facts.imports[head], self._root[facts.path])
        elif head in facts.aliases and depth < 20 and facts.aliases[head] != name:
            target = self._qualify(facts, facts.aliases[head], depth + 1)
        else:
            target = self._from_star(facts, head, depth)
        if target is None:
            return None
        return self._canonical(f"{target}.{rest}" if rest else target, depth + 1)

    def _from_star(self, facts: FileFacts, name: str, depth: int) -> str | None:
        """`module.name` where `from module import *` binds `name` in `facts`'s
        file (a leading underscore is not star-exported)."""
        if name.startswith("_") or depth > 20:
            return None
        for module in facts.star_imports:
            rooted = self._rooted(module, self._root[facts.path])
            found = self._module(rooted)
            if found is not None and (
                self._defines(found, name) or self._from_star(found, name, depth + 1)
            ):
                return f"{rooted}.{name}"
        return None

    @staticmethod
    def _defines(facts: FileFacts, name: str) -> bool:
        return (
            name in facts.classes
            or name in facts.imports
            or name in facts.aliases
            or name in facts.int_list_functions
        )

    def unresolved_bases(self, facts: FileFacts) -> list[tuple[int, str, str]]:
        """`(line of the class, base as written, why)` for each base that names
        a module of the tree whose text does not bind it: whether such a class
        is a Module cannot be told."""
        found = []
        for cls in facts.classes.values():
            for base in cls.bases:
                qualified = self.qualify(facts, base)
                located = None if qualified is None else self._locate(qualified)
                if located is None:
                    continue
                module, rest = located
                # (one bound there through `*` was followed by `qualify`)
                if self._defines(module, rest.partition(".")[0]):
                    continue
                why = (
                    f"re-exported dynamically at {module.path}:{module.dynamic_export}"
                    if module.dynamic_export is not None
                    else f"{module.path} does not bind it where migrate can read"
                )
                found.append((cls.line, base, why))
        return found

    def _canonical(self, qualified: str, depth: int) -> str:
        """Follow re-exports: `pkg.Base` -> `pkg.base.Base`."""
        found = None if depth > 20 else self._locate(qualified)
        if found is None:
            return qualified
        facts, rest = found
        if rest.partition(".")[0] in facts.classes or rest in facts.int_list_functions:
            # A class, or an attribute of one: nothing to follow. Named by the
            # module's key, whichever namespace spelling reached it.
            return f"{self.key(facts)}.{rest}"
        return self._qualify(facts, rest, depth + 1) or qualified

    def class_facts(self, qualified: str) -> tuple[FileFacts, ClassFacts] | None:
        """The file and class statement of a class of the tree."""
        if qualified not in self._class_facts:
            found = self._locate(qualified)
            cls = None if found is None else found[0].classes.get(found[1])
            known = None if found is None or cls is None else (found[0], cls)
            self._class_facts[qualified] = known
        return self._class_facts[qualified]

    def _base_names(self, facts: FileFacts, cls: ClassFacts) -> list[str]:
        """The qualified names of a class's bases (as written, outside the tree)."""
        return [self.qualify(facts, base) or base for base in cls.bases]

    def _lineage(self, qualified: str) -> _Lineage:
        """What a class inherits, found once per class from its bases'."""

        def bases(name: str) -> list[str]:
            found = self.class_facts(name)
            return [] if found is None else self._base_names(*found)

        def lineage(name: str, inherited: list[_Lineage]) -> _Lineage:
            found = self.class_facts(name)
            # A class outside the tree has no bases, `__init__` or `__eq__` here.
            cls = ClassFacts(name, []) if found is None else found[1]
            return _Lineage(
                module=name in ROOTS or any(b.module for b in inherited),
                from_equinox=name in _EQUINOX_MODULE
                or any(b.from_equinox for b in inherited),
                init=cls.has_init or any(b.init for b in inherited),
                by_value=cls.value_eq
                or any(b.by_value for b in inherited)
                or any(
                    written in _VALUE_BASES or base in _VALUE_BASES
                    for written, base in zip(cls.bases, bases(name), strict=True)
                ),
            )

        return _fold(qualified, self._lineages, bases, lineage)

    def module_classes(self, facts: FileFacts) -> list[ClassFacts]:
        return [
            cls
            for cls in facts.classes.values()
            if self._lineage(f"{self.key(facts)}.{cls.qualname}").module
        ]

    def exported_module_classes(self) -> set[str]:
        """The names of Module classes, and the other names files bind them to
        (`import ... as`, aliases), for finding files that mention them."""
        names = set()
        for facts in self.files.values():
            names.update(
                cls.qualname.rpartition(".")[2] for cls in self.module_classes(facts)
            )
            names.update(self._bound_classes(facts)[1])
        return names

    @cached_property
    def _children(self) -> dict[str, list[str]]:
        """Qualified name -> the tree's classes with it among their bases."""
        children: dict[str, list[str]] = {}
        for facts in self.files.values():
            for cls in facts.classes.values():
                child = f"{self.key(facts)}.{cls.qualname}"
                for base in self._base_names(facts, cls):
                    children.setdefault(base, []).append(child)
        return children

    def _subtree_uses(self, qualified: str) -> _SubtreeUses:
        """What a class and its descendants do with their attributes, once per
        class: a chain of 15,000 subclasses costs its size, not its square."""
        if self.class_facts(qualified) is None:
            return _SubtreeUses()

        def merged(name: str, subtrees: list[_SubtreeUses]) -> _SubtreeUses:
            out = self._own_uses(self.class_facts(name))
            for subtree in subtrees:
                out.absorb(subtree)
            return out

        children = self._children
        return _fold(qualified, self._subtrees, lambda n: children.get(n, []), merged)

    def _own_uses(self, found: tuple[FileFacts, ClassFacts] | None) -> _SubtreeUses:
        """What one class's own code does with its attributes."""
        out = _SubtreeUses()
        if found is None:
            return out
        facts, member = found
        where = facts.path
        out.reached = self._positional.get(member.qualname.rpartition(".")[2], 0)
        for table, mine in ((out.uses, member.uses), (out.assigns, member.assigns)):
            for attr, kinds in mine.items():
                for kind, line in kinds.items():
                    table.setdefault(attr, {}).setdefault(kind, f"{where}:{line}")
        for attr, called in member.objects.items():
            resolved = self.qualify(facts, called) or called
            lineage = self._lineage(resolved)
            if not (
                lineage.module
                or resolved.split(".")[0] in _PYTREE_PACKAGES
                or lineage.by_value
                or resolved in self._registered
                or resolved in _STDLIB_PYTREES
            ):
                out.objects.setdefault(attr, called)
                if (
                    self.class_facts(resolved) is None
                    and resolved.partition(".")[0] not in STDLIB
                ):
                    out.maybe_pytree.add(attr)
        for attr, (called, line) in member.calls.items():
            resolved = self.qualify(facts, called)
            if resolved in ARRAY_BUILDERS:
                out.assigns.setdefault(attr, {}).setdefault(BUILT, f"{where}:{line}")
                continue
            located = None if resolved is None else self._locate(resolved)
            if located is not None and located[1] in located[0].int_list_functions:
                kinds = out.assigns.setdefault(attr, {})
                kinds.setdefault(SHAPE_VALUE, f"{where}:{line}")
                out.helpers.setdefault(attr, called)
        return out

    def context(self, path: str) -> FileContext:
        facts = self.files[path]
        classes: dict[str, ClassContext] = {}
        for cls in self.module_classes(facts):
            qualified = f"{self.key(facts)}.{cls.qualname}"
            merged = self._subtree_uses(qualified)
            # An instance assigned that is not in `objects` was a Module's.
            assigns = {
                attr: {k: v for k, v in kinds.items() if k != OBJECT}
                if OBJECT in kinds and attr not in merged.objects
                else kinds
                for attr, kinds in merged.assigns.items()
            }
            lineage = self._lineage(qualified)
            classes[cls.qualname] = ClassContext(
                merged.uses,
                assigns,
                merged.objects,
                not lineage.init,
                cls.fields,
                frozenset(merged.maybe_pytree & merged.objects.keys()),
                merged.helpers,
                lineage.from_equinox,
                self._constants(cls, merged),
            )
        plain, bases = self._bound_classes(facts)
        written = [
            *facts.imports,
            *facts.aliases.values(),
            *(base for cls in facts.classes.values() for base in cls.bases),
        ]
        return FileContext(
            classes,
            self._tree_at,
            plain,
            bases,
            frozenset(n for n in written if self._imported_equinox_module(facts, n)),
            frozenset(self._imported_names.get(self.key(facts), ())),
            bindings=facts.bindings,
            unresolved=tuple(self.unresolved_bases(facts)),
        )

    @cached_property
    def _tree_at(self) -> dict[str, str]:
        return {
            attr: f"{facts.path}:{line}"
            for facts in self.files.values()
            for attr, line in facts.tree_at.items()
        }

    @cached_property
    def _positional(self) -> dict[str, float]:
        """`FileFacts.positional`, over every file."""
        most: dict[str, float] = {}
        for facts in self.files.values():
            for callee, count in facts.positional.items():
                most[callee] = max(most.get(callee, 0), count)
        return most

    @cached_property
    def _set_names(self) -> frozenset[str]:
        return frozenset().union(*(facts.set_names for facts in self.files.values()))

    def _constants(self, cls: ClassFacts, subtree: _SubtreeUses) -> frozenset[str]:
        """The class's own fields nothing may give a value: not named before `=`
        or in a string, not replaced or assigned, not reached by positional
        arguments (counted from its own fields: its bases' come first)."""
        calls = self._positional
        reached = max(
            subtree.reached, *(calls.get(n, 0) for n in ("cls", "__init__", "()"))
        )
        own = [name for name in cls.fields if name not in cls.class_vars]
        return frozenset(
            name
            for index, name in enumerate(own)
            if index >= reached
            and name not in self._set_names
            and name not in self._tree_at
            and name not in subtree.assigns
        )

    @cached_property
    def _registered(self) -> frozenset[str]:
        """The qualified names of classes registered as pytree nodes."""
        return frozenset(
            self.qualify(facts, name) or name
            for facts in self.files.values()
            for name in facts.registered
        )

    def _imported_equinox_module(
        self, facts: FileFacts, name: str, depth: int = 0
    ) -> bool:
        """Whether `name` in `facts`'s file is equinox's Module through imports
        alone (`Base = eqx.Module` is rewritten where it is)."""
        head, _, rest = name.partition(".")
        if depth > 20 or head in facts.classes or head not in facts.imports:
            return False
        target = f"{facts.imports[head]}.{rest}" if rest else facts.imports[head]
        if target in _EQUINOX_MODULE:
            return True
        found = self._locate(self._rooted(target, self._root[facts.path]))
        return found is not None and self._imported_equinox_module(*found, depth + 1)

    @cached_property
    def _imported_names(self) -> dict[str, set[str]]:
        """Module key -> the names other files import from it by name."""
        imported: dict[str, set[str]] = {}
        for facts in self.files.values():
            root = self._root[facts.path]
            for target in facts.imports.values():
                module, _, name = target.rpartition(".")
                other = self._module(self._rooted(module, root)) if module else None
                if other is not None and other is not facts:
                    imported.setdefault(self.key(other), set()).add(name)
        return imported

    def _bound_classes(self, facts: FileFacts) -> tuple[frozenset[str], frozenset[str]]:
        """The file's names for plain classes and for Module classes of the tree."""
        plain, modules = set(), set()
        for local in [*facts.classes, *facts.imports, *facts.aliases]:
            qualified = self.qualify(facts, local)
            if qualified is None:
                continue
            lineage = self._lineage(qualified)
            if lineage.module:
                modules.add(local)
            elif (
                self.class_facts(qualified) is not None
                and not lineage.by_value
                and qualified not in self._registered
            ):
                plain.add(local)
        return frozenset(plain), frozenset(modules)
