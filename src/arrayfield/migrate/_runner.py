"""Running the codemod over a tree: reading the files `_walk` found, indexing
them (phase 1), then analysing each file that may change (phase 2, `_read`)
and splicing its new text when one is needed (`_splice`). Nothing here
prints: errors come back as `FileError`s, in the order found, for `_cli`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ._checks import calls_matter
from ._facts import FileFacts, forget_directories, module_name, read_file, resolved_path
from ._index import ProjectIndex
from ._lint import config_for
from ._read import analyse_source

if TYPE_CHECKING:
    from ._diagnostics import Diagnostic
    from ._splice import MigrationResult

# A file that mentions none of these cannot hold a Module class unless it
# subclasses one found elsewhere, which `index_project` searches for by name;
# the last two find where classes are registered as pytree nodes. (Five
# substring tests take a quarter of the time of one regex of the five.)
_MENTIONS = (b"equinox", b"eqx", b"Module", b"register_pytree", b"register_dataclass")
# What may continue an identifier, as UTF-8 bytes.
_IDENTIFIER_BYTES = frozenset(
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
) | frozenset(range(0x80, 0x100))
# Up to this many initials, a scan per initial is the faster name search.
_FEW_INITIALS = 8


class CheckResult(NamedTuple):
    """One file checked, not rewritten: as `MigrationResult`, without the text."""

    diagnostics: tuple[Diagnostic, ...]
    changed: bool


class FileError(NamedTuple):
    """Why a path could not be processed, and where (1:1 when nowhere in it)."""

    path: Path | str
    message: str
    line: int = 1
    col: int = 1


def read_files(files: Iterable[Path]) -> tuple[dict[Path, bytes], list[FileError]]:
    """The bytes of each file that can be read."""
    contents: dict[Path, bytes] = {}
    errors: list[FileError] = []
    for path in files:
        try:
            contents[path] = path.read_bytes()
        except OSError as exc:
            errors.append(FileError(path, f"cannot read: {exc.strerror or exc}"))
    return contents, errors


def _parse_error(path: Path, exc: SyntaxError | ValueError) -> FileError:
    if isinstance(exc, SyntaxError):
        message = f"cannot parse: {exc.msg}"
        return FileError(path, message, exc.lineno or 1, exc.offset or 1)
    return FileError(path, f"cannot parse: {exc}")  # null bytes


def index_project(
    contents: dict[Path, bytes], trees: dict[Path, ast.Module] | None = None
) -> tuple[ProjectIndex, list[FileError]]:
    """Phase 1: index the files that mention equinox, then, until nothing new
    turns up, those that mention a Module class found so far, and the modules
    that files with Module classes, their bases and star imports come from
    (where fields' types and re-exports are). Parses go into `trees`, if given."""
    trees = {} if trees is None else trees
    forget_directories()
    facts: list[FileFacts] = []
    errors: list[FileError] = []
    pending = dict(contents)
    # Module name -> the pending files of that name, one per import root.
    by_module: dict[str, list[Path]] = {}
    found = [
        path
        for path, data in pending.items()
        if any(word in data for word in _MENTIONS)
    ]
    searched: set[str] = set()
    index = ProjectIndex(facts)
    while found:
        new: list[FileFacts] = []
        for path in found:
            del pending[path]
            try:
                tree = ast.parse(contents[path], filename=str(path))
                trees[path] = tree
                new.append(read_file(str(path), contents[path], tree))
            except (SyntaxError, ValueError) as exc:
                errors.append(_parse_error(path, exc))
        facts.extend(new)
        index = ProjectIndex(facts)
        if not pending:
            break
        names = index.exported_module_classes() - searched
        searched |= names
        patterns = _name_patterns(sorted(names)) if names else []
        found = [
            path
            for path, data in pending.items()
            if any(_mentions(pattern, data) for pattern in patterns)
        ]
        imported = {
            target
            for file in new
            if index.module_classes(file)
            for target in file.imports.values()
        }
        # Where a class's base is imported from, and what a file imports `*`
        # from: a base re-exported there is found only by reading them.
        imported.update(
            file.imports[base.partition(".")[0]]
            for file in new
            for cls in file.classes.values()
            for base in cls.bases
            if base.partition(".")[0] in file.imports
        )
        imported.update(module for file in new for module in file.star_imports)
        if imported and not by_module:  # made once, when first needed
            for path in pending:
                by_module.setdefault(module_name(path)[0], []).append(path)
        for target in imported:
            for module in (target, target.rpartition(".")[0]):
                for path in by_module.get(module, []):
                    if path in pending and path not in found:
                        found.append(path)
    return index, errors


def _alternatives(names: Sequence[str]) -> bytes:
    """A regex of the names as a trie (`Part(?:1|2)`): `re` follows one branch
    where a plain alternation tries every name at every byte."""
    trie: dict[str, dict] = {}
    for name in names:
        node = trie
        for char in name:
            node = node.setdefault(char, {})
        node[""] = {}  # a name ends here

    def branches(node: dict[str, dict]) -> bytes:
        options = [
            re.escape(char.encode()) + branches(child)
            for char, child in node.items()
            if char
        ]
        if not options:
            return b""
        body = options[0] if len(options) == 1 else b"(?:" + b"|".join(options) + b")"
        return b"(?:" + body + b")?" if "" in node else body

    return branches(trie)


def _mentions(pattern: re.Pattern[bytes], data: bytes) -> bool:
    """Whether `pattern` matches after no identifier character (a leading `\b`
    would stop `re` from scanning ahead for the first letters)."""
    match = pattern.search(data)
    while match is not None:
        start = match.start()
        if start == 0 or data[start - 1] not in _IDENTIFIER_BYTES:
            return True
        # A later name may start inside this match (`Inner` in `MyOuter.Inner`).
        match = pattern.search(data, start + 1)
    return False


def _name_patterns(names: Sequence[str]) -> list[re.Pattern[bytes]]:
    """Regexes that together find the names as whole identifiers (`\b` misses
    non-ASCII letters); one per initial, found at `memchr` speed, when few."""
    by_initial: dict[str, list[str]] = {}
    for name in names:
        by_initial.setdefault(name[0], []).append(name)
    groups = by_initial.values() if len(by_initial) <= _FEW_INITIALS else [names]
    end = rb"(?![A-Za-z0-9_\x80-\xff])"
    return [re.compile(_alternatives(group) + end) for group in groups]


def files_to_rewrite(contents: Mapping[Path, bytes], index: ProjectIndex) -> list[Path]:
    """The files phase 2 reads: with a Module class, importing equinox, calling
    the tree's Module classes as a call rule reads, or with an AF009 base."""
    work = []
    for path, data in contents.items():
        facts = index.files.get(str(path))
        if facts is not None and (
            index.module_classes(facts)
            or facts.imports_equinox()
            or (calls_matter(data) and index.context(str(path)).bases)
            or index.unresolved_bases(facts)
        ):
            work.append(path)
    return work


def rewrite_files(
    work: list[Path],
    contents: dict[Path, bytes],
    index: ProjectIndex,
    *,
    fix: bool,
    typed: bool,
    text: bool,
    trees: dict[Path, ast.Module] | None = None,
) -> Iterator[MigrationResult | CheckResult | FileError]:
    """Phase 2 for each file of `work`, from its parse in phase 1 (dropped once
    used); `text`: whether a changed file's new text is needed."""
    trees = {} if trees is None else trees
    project = index.top_level_modules()
    for path in work:
        config = config_for(resolved_path(path).parent)
        lint = config._replace(first_party=config.first_party | project)
        context = index.context(str(path))._replace(lint=lint)
        tree = trees.pop(path, None)
        try:
            analysis = analyse_source(
                contents[path], context, fix=fix, typed=typed, tree=tree
            )
        except (UnicodeDecodeError, LookupError) as exc:
            yield FileError(path, f"cannot decode: {exc}")
        except (SyntaxError, ValueError) as exc:
            yield _parse_error(path, exc)
        else:
            if analysis.changes and text:
                # The writer is imported only when a text is written: `--check`
                # never needs it (~7 ms of its start-up).
                from ._splice import splice_source

                yield splice_source(analysis)
            else:
                yield CheckResult(analysis.reported(), analysis.changes)
