"""The codemod: equinox `Module` classes become `arrayfield.ArrayModule` classes.

A file goes through three steps. An analysis pass (`_analysis`, running the
checks of `_checks`) finds the Module classes, plans the rewrites and collects
diagnostics; a rewrite pass (`_rewrite`) changes only the planned nodes, so
every other byte of the file survives; a last step adds
`import arrayfield as af` and drops the imports the rewrite left unused. What
the project index (`_index`) knows about the file, its Module classes whose
bases live elsewhere and how the whole tree uses their fields, comes in as a
`FileContext`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper

from ._analysis import Analysis
from ._bindings import ImportMap
from ._checks import calls_matter
from ._diagnostics import Diagnostic
from ._imports import add_import, can_bind, import_map, remove_unused_imports
from ._index import FileContext
from ._rewrite import Rewriter


@dataclasses.dataclass(frozen=True)
class MigrationResult:
    """The outcome of migrating one file.

    **Fields:**

    - `original`: the source text as read.
    - `code`: the migrated source text; equal to `original` when nothing changed.
    - `encoding`: the file's encoding, for writing `code` back as bytes.
    - `diagnostics`: the places that need a human decision, sorted by position.
    """

    original: str
    code: str
    encoding: str
    diagnostics: tuple[Diagnostic, ...]

    @property
    def changed(self) -> bool:
        return self.code != self.original


def arrayfield_names(
    imports: ImportMap, needed: Sequence[str], af_is_free: Callable[[], bool]
) -> tuple[dict[str, str], str | None]:
    """Source text naming arrayfield's `ArrayModule`, `Field` and `field`, and
    the import to add for the `needed` ones the file does not import (if any);
    `af_is_free` says whether the file may bind `af` to arrayfield
    (`_imports.can_bind`), asked only when an import is added."""
    found = {
        name: imports.local_name_for(f"arrayfield.{name}")
        for name in ("ArrayModule", "Field", "field")
    }
    if all(found[name] is not None for name in needed):
        module, new_import = "arrayfield", None
    elif af_is_free():
        module, new_import = "af", "import arrayfield as af"
    else:
        module, new_import = "arrayfield", "import arrayfield"
    names = {name: text or f"{module}.{name}" for name, text in found.items()}
    return names, new_import


def migrate_module(
    module: cst.Module,
    context: FileContext | None = None,
    *,
    fix: bool = False,
    typed: bool = False,
    scan_calls: bool = True,
    source: str | None = None,
) -> tuple[cst.Module, list[Diagnostic]]:
    """Migrate a parsed module; see `migrate_source`. `scan_calls=False` (for a
    file without `type(` in it) skips looking for `type(...)` classes; `source`,
    the module's text, lets `# noqa: AF002` stop the `--fix` edit too."""
    imports = import_map(module)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    analysis = Analysis(wrapper, imports, context, fix, typed, source)
    if scan_calls:
        wrapper.visit(analysis)
    else:
        analysis.walk_statements(module)
    diagnostics = sorted(analysis.diagnostics)
    needed = analysis.names_needed()
    if not (needed or analysis.field_edits):
        return module, diagnostics

    names, new_import = arrayfield_names(
        imports, needed, lambda: can_bind(wrapper, "af", "arrayfield", source)
    )
    migrated = wrapper.visit(Rewriter(analysis, names))
    if new_import is not None:
        first_party = context.lint.first_party if context else frozenset()
        migrated = add_import(migrated, new_import, first_party)
    released = analysis.released_names
    if context is not None:
        released = released - context.exported  # other files import them from here
    migrated = remove_unused_imports(migrated, released)
    return migrated, diagnostics


def migrate_source(
    source: str | bytes,
    context: FileContext | None = None,
    *,
    fix: bool = False,
    typed: bool = False,
) -> MigrationResult:
    """Rewrite the equinox Module classes of one file to use arrayfield.

    **Arguments:**

    - `source`: the file's contents. Bytes are decoded the way Python would
        (PEP 263 coding line, else UTF-8) and `MigrationResult.encoding` says how.
    - `context`: what the project index (`_index.ProjectIndex.context`) knows
        about this file: its Module classes whose bases are in other files, and
        how the class and its subclasses use each field. Without it, only
        classes whose base is visibly equinox's Module are analysed.
    - `fix`: also make the safe edits diagnostics ask for (AF002's
        `af.field(convert=False)` on fields used as shapes).
    - `typed`: also wrap every converted array field's annotation in
        `af.Field[...]` and write its bare default as `af.field(default=...)`,
        so that type checkers accept the numbers arrayfield converts.

    **Returns:**

    A `MigrationResult`. Its `code` is `original` plus the rewrites: classes
    whose base is equinox's `Module` (any spelling) now subclass
    `af.ArrayModule`; `eqx.field(converter=jnp.asarray)` on array-annotated
    fields is dropped and the annotation wrapped in `af.Field[...]` (a type
    checker read the converter's parameter type; `af.Field` says the same);
    `import arrayfield as af` is added and imports that only the rewritten code
    used are removed.

    **Raises:**

    `libcst.ParserSyntaxError` if the source does not parse.
    """
    module = cst.parse_module(source)
    scan_calls = calls_matter(source)
    # libcst reproduces its input exactly: decoding is cheaper than `.code`.
    original = source if isinstance(source, str) else source.decode(module.encoding)
    if original.startswith("\ufeff"):
        original = module.code
    migrated, diagnostics = migrate_module(
        module,
        context,
        fix=fix,
        typed=typed,
        scan_calls=scan_calls,
        source=original,
    )
    return MigrationResult(
        original=original,
        code=original if migrated is module else migrated.code,
        encoding=module.encoding,
        diagnostics=tuple(diagnostics),
    )
