"""Running the codemod over a tree: finding and reading the files, building the
project index until nothing new turns up, and the per-file rewrite, in worker
processes when there are many files.

Each file is first analysed from its `ast` parse (`_check_ast`), which gives its
diagnostics and whether the rewrite changes it; libcst parses only the files
whose new text is written or previewed (or that `ast` cannot decide), so that
`migrate --check` never imports libcst for most trees.

Nothing here prints: errors come back as `FileError`s for the command line
(`_cli`) to report, in the order they were found.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ._check_ast import CheckResult, check_source
from ._facts import FileFacts, module_name, read_file
from ._index import FileContext, ProjectIndex
from ._lint import config_for
from ._syntax import Undecidable
from ._walk import python_files

if TYPE_CHECKING:
    from ._transform import MigrationResult

_T = TypeVar("_T")

# A file that mentions none of these cannot hold a Module class unless it
# subclasses one found elsewhere, which `index_project` searches for by name;
# the last two find where classes are registered as pytree nodes.
_MENTIONS = re.compile(rb"equinox|eqx|Module|register_pytree|register_dataclass")
# Worker processes pay off from this many bytes to parse: forking two and
# sending them the jobs costs about what analysing this much with `ast` does.
_PARALLEL_BYTES = 2_000_000
# Whether files are analysed with `ast` first; False (for tests) reads every
# file with libcst, the reference the `ast` reading must agree with.
READ_WITH_AST = True


@dataclasses.dataclass(frozen=True)
class FileError:
    """Why a path could not be processed, and where (1:1 when nowhere in it)."""

    path: Path | str
    message: str
    line: int = 1
    col: int = 1


def find_files(
    paths: Sequence[str], excludes: Sequence[str]
) -> tuple[list[Path], list[FileError]]:
    """The Python files under `paths`, each once however it was reached
    (`pkg ./pkg`, a link to another file of the tree): by its resolved path,
    under the first name found, or its own name rather than a link's."""
    errors: list[FileError] = []
    files: dict[Path, Path] = {}
    for given in paths:
        path = Path(given)
        if not path.exists():
            errors.append(FileError(given, "no such file or directory"))
            continue
        for found in python_files(path, excludes):
            key = found.resolve()
            kept = files.get(key)
            if kept is None or (kept.is_symlink() and not found.is_symlink()):
                files[key] = found
    return list(files.values()), errors


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


def worth_forking(sizes: Iterable[int], workers: int) -> bool:
    """Whether jobs of these sizes (bytes of source) go to worker processes."""
    return workers > 1 and sum(sizes) >= _PARALLEL_BYTES


def pool_map(function: Callable[..., _T], jobs: list[tuple], workers: int) -> list[_T]:
    """`function(*job)` for every job, in `workers` worker processes (in this
    one for `workers <= 1`; see `worth_forking`).

    Workers are forked: a spawned one would import the `arrayfield` package
    afresh, and forking skips the start-up of a new interpreter.
    """
    if workers <= 1 or len(jobs) < 2:
        return [function(*job) for job in jobs]
    import concurrent.futures
    import multiprocessing

    try:
        context = multiprocessing.get_context("fork")
    except ValueError:  # Windows: no fork
        return [function(*job) for job in jobs]
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        chunk = max(1, len(jobs) // (4 * workers))
        return list(pool.map(function, *zip(*jobs, strict=True), chunksize=chunk))


def _syntax_error(data: bytes, exc: Exception) -> tuple[int, int, str]:
    """Line, column (1-based) and message of a syntax error: Python's own when it
    sees one, as it names the problem more precisely than libcst's parser does."""
    try:
        compile(data, "<file>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as python_error:
        return python_error.lineno or 1, python_error.offset or 1, python_error.msg
    except ValueError:  # e.g. null bytes
        pass
    message = " ".join(str(getattr(exc, "message", exc)).split())
    line = getattr(exc, "raw_line", 1)
    column = getattr(exc, "raw_column", 0) + 1  # libcst counts from 0
    return line, column, message


def _index_file(
    path: str, data: bytes, keep_tree: bool
) -> tuple[FileFacts, ast.Module | None] | FileError:
    """Phase 1: the file's facts, and with `keep_tree` its parse (for phase 2
    in this process), or why it does not parse."""
    try:
        tree = ast.parse(data, filename=path)
        return read_file(path, data, tree), tree if keep_tree else None
    except SyntaxError as exc:
        message = f"cannot parse: {exc.msg}"
        return FileError(path, message, exc.lineno or 1, exc.offset or 1)
    except ValueError as exc:  # null bytes
        return FileError(path, f"cannot parse: {exc}")


def _transform_file(
    path: str,
    data: bytes,
    tree: ast.Module | None,
    context: FileContext,
    fix: bool,
    typed: bool,
    text: bool,
) -> MigrationResult | CheckResult | FileError:
    """Phase 2: the rewrite and diagnostics of one file (whose parse `tree` is
    given when phase 1 kept it), or an error message. With `text` false, a
    changed file's new text is not needed."""
    if READ_WITH_AST:
        try:
            checked = check_source(data, context, fix=fix, typed=typed, tree=tree)
        except (Undecidable, SyntaxError, ValueError, LookupError):
            pass  # libcst decides, and words any error as libcst sees it
        else:
            if not (checked.changed and text):
                return checked
    import libcst

    from ._transform import migrate_source

    try:
        return migrate_source(data, context, fix=fix, typed=typed)
    except libcst.ParserSyntaxError as exc:
        line, col, message = _syntax_error(data, exc)
        return FileError(path, f"cannot parse: {message}", line, col)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        return FileError(path, f"cannot decode: {exc}")


def index_project(
    contents: dict[Path, bytes],
    workers: int,
    trees: dict[Path, ast.Module] | None = None,
) -> tuple[ProjectIndex, list[FileError]]:
    """Index the files that mention equinox, then, until nothing new turns up,
    those that mention a Module class found so far (a subclass in a file that
    imports only the project's own base class) and the modules that files with
    Module classes import from (where the types of their fields are defined).

    The parses made in this process (not in workers) go into `trees`, if given,
    so that phase 2 need not parse those files again."""
    facts: list[FileFacts] = []
    errors: list[FileError] = []
    pending = dict(contents)
    # Module name -> the pending files of that name, one per import root.
    by_module: dict[str, list[Path]] | None = None
    pattern: re.Pattern[bytes] | None = _MENTIONS
    found = [path for path, data in pending.items() if pattern.search(data)]
    searched: set[str] = set()
    while found:
        for path in found:
            del pending[path]
        forking = worth_forking((len(contents[path]) for path in found), workers)
        keep = trees is not None and not forking
        jobs = [(str(path), contents[path], keep) for path in found]
        new: list[FileFacts] = []
        results = pool_map(_index_file, jobs, workers if forking else 1)
        for path, result in zip(found, results, strict=True):
            if isinstance(result, FileError):
                errors.append(dataclasses.replace(result, path=path))
                continue
            file_facts, tree = result
            new.append(file_facts)
            if trees is not None and tree is not None:
                trees[path] = tree
        facts.extend(new)
        index = ProjectIndex(facts)
        if not pending:
            break
        names = index.exported_module_classes() - searched
        searched |= names
        found = []
        if names:
            words = b"|".join(re.escape(name.encode()) for name in sorted(names))
            pattern = re.compile(rb"\b(?:" + words + rb")\b")
            found = [path for path, data in pending.items() if pattern.search(data)]
        imported = {
            target
            for file in new
            if index.module_classes(file)
            for target in file.imports.values()
        }
        if imported:
            if by_module is None:
                by_module = {}
                for path in pending:
                    by_module.setdefault(module_name(path)[0], []).append(path)
            for target in imported:
                for module in (target, target.rpartition(".")[0]):
                    for path in by_module.get(module) or []:
                        if path in pending and path not in found:
                            found.append(path)
    return ProjectIndex(facts), errors


def files_to_rewrite(contents: Iterable[Path], index: ProjectIndex) -> list[Path]:
    """The files phase 2 reads: those with a Module class, or that import
    equinox (an alias `Base = eqx.Module`, a `type(...)` class)."""
    work = []
    for path in contents:
        facts = index.files.get(str(path))
        if facts is not None and (
            index.module_classes(facts) or facts.imports_equinox()
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
    workers: int,
    trees: dict[Path, ast.Module] | None = None,
) -> list[MigrationResult | CheckResult | FileError]:
    """Phase 2 for each file of `work`, in order; `text` says whether the new
    text of changed files is needed (to write or preview it), `trees` holds
    the parses phase 1 kept."""
    forking = worth_forking((len(contents[path]) for path in work), workers)
    kept = {} if trees is None or forking else trees  # not sent to workers
    project = index.top_level_modules()
    jobs = []
    for path in work:
        config = config_for(path.resolve().parent)
        lint = dataclasses.replace(config, first_party=config.first_party | project)
        context = dataclasses.replace(index.context(str(path)), lint=lint)
        tree = kept.get(path)
        jobs.append((str(path), contents[path], tree, context, fix, typed, text))
    return pool_map(_transform_file, jobs, workers if forking else 1)
