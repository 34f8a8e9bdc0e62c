"""`arrayfield migrate PATH...`: the command-line front end of the codemod.

Imports libcst only when the command runs, so that a missing optional
dependency becomes a one-line message instead of a traceback.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import os
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ._diagnostics import CODES, source_lines, suppressed
from ._index import FileContext, FileFacts, ProjectIndex, module_name, read_file
from ._walk import python_files

if TYPE_CHECKING:
    from ._transform import MigrationResult

_T = TypeVar("_T")

EXIT_OK = 0
EXIT_CHANGES_PENDING = 1
EXIT_ERROR = 2

# A file that mentions none of these cannot hold a Module class unless it
# subclasses one found elsewhere, which `_index_project` searches for by name.
_MENTIONS = re.compile(rb"equinox|eqx|Module")
# Worker processes pay off from this many files to parse.
_PARALLEL_THRESHOLD = 24
# A progress counter appears on a terminal from this many files to rewrite.
_PROGRESS_THRESHOLD = 200

_DESCRIPTION = """\
Rewrite equinox Module classes to subclass arrayfield's ArrayModule.

Classes whose base is equinox's Module (eqx.Module, equinox.Module, an alias
of `from equinox import Module`, `Base = eqx.Module`, the bases of
`type(name, (eqx.Module,), namespace)`) get `af.ArrayModule` instead, `import
arrayfield as af` is added once, and eqx.field(converter=jnp.asarray) on
array-annotated fields is dropped because the base class now converts (the
annotation becomes af.Field[...], which tells type checkers what the converter
told them). With --typed, every converted array field gets af.Field[...]. Every
other byte of a file is kept, files that need no change are not written, and
a second run changes nothing.

All PATHs form one project: subclasses of a Module class are found in every
file, through imports, relative imports and re-exports, and diagnostics use
what the whole tree does with a field. Directories are searched for *.py
files, skipping hidden files and directories, links to nothing, build/,
dist/, site-packages, virtual environments (pyvenv.cfg) and .gitignore'd
paths; a file reached twice (a link, a directory named twice) is taken once.
--exclude takes globs, directory paths (`data/`, `./src/pkg/data`) and
absolute paths. `# noqa: AF001` silences a diagnostic.
"""


def _guide() -> str:
    """Where the migration guide is: installed with the package, or in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "migration.md", here.parents[2] / "docs" / "migration.md"):
        if candidate.is_file():
            return str(candidate)
    return "docs/migration.md in arrayfield's source distribution"


def _epilog() -> str:
    codes = "\n".join(
        textwrap.fill(
            f"{code}  {text}", width=79, initial_indent="  ", subsequent_indent=" " * 9
        )
        for code, text in CODES.items()
    )
    return f"""\
diagnostics (printed as path:line:col: CODE message, sorted; they need a human
decision and do not change the exit status; with --diff they go to stderr and
stdout holds only the diff):
{codes}

errors are printed as path:line:col: error: message on stderr (1:1 when the
error is not at a place in the file).

exit status:
  0  nothing to change, or files rewritten
  1  --check or --diff: some files would change
  2  a path could not be read, or a file does not parse (the other files are
     still processed)

The whole migration, step by step: {_guide()}
"""


def add_parser(subcommands: argparse._SubParsersAction) -> None:
    """Register `migrate` on the `arrayfield` command's subcommands."""
    parser = subcommands.add_parser(
        "migrate",
        help="rewrite equinox Module classes to arrayfield ArrayModule classes",
        description=_DESCRIPTION,
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; list the files that would change and exit 1 if any",
    )
    parser.add_argument(
        "--diff",
        action="store_true",
        help="write nothing; print a unified diff of the changes",
    )
    parser.add_argument(
        "--fix",
        action="store_true",
        help="also make the safe edits diagnostics ask for (AF002 on fields used "
        "as shapes: af.field(convert=False))",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="skip files and directories matching GLOB (repeatable)",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        type=_job_count,
        default=0,
        help="worker processes for parsing (default: one per CPU)",
    )
    parser.add_argument(
        "--typed",
        action="store_true",
        help="wrap every converted array field's annotation in af.Field[...] (and "
        "write bare defaults as af.field(default=...)), so pyright and mypy accept "
        "the numbers arrayfield converts",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print only diagnostics, diffs and errors",
    )
    parser.set_defaults(run=run)


def _job_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count: {text!r}") from None
    if count < 0:
        raise argparse.ArgumentTypeError(
            f"must be 0 (one per CPU) or more, not {count}"
        )
    return count


def _split_lf(data: bytes) -> list[bytes]:
    """The lines of a file as patch(1) and `git apply` count them: up to each
    `\\n`, so that a lone `\\r` or a form feed stays inside its line."""
    lines = data.split(b"\n")
    out = [line + b"\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def _unified_diff(path: str, result: MigrationResult) -> bytes:
    """A patch that `git apply` and patch(1) accept: the lines in the file's own
    encoding (a byte order mark included)."""
    name = os.fsencode(path)
    lines = difflib.diff_bytes(
        difflib.unified_diff,
        _split_lf(result.original.encode(result.encoding)),
        _split_lf(result.code.encode(result.encoding)),
        fromfile=name,
        tofile=name,
    )
    out = []
    for line in lines:
        if not line.endswith(b"\n"):
            line += b"\n\\ No newline at end of file\n"
        out.append(line)
    return b"".join(out)


@dataclasses.dataclass
class _Outcome:
    changed: list[str] = dataclasses.field(default_factory=list)
    diagnostics: list[tuple[str, int, int, str]] = dataclasses.field(
        default_factory=list
    )
    errors: int = 0


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


def _error(path: Path | str, message: str, line: int = 1, col: int = 1) -> None:
    # Python reports some errors (an unknown coding) at column -1 or 0.
    line, col = max(line, 1), max(col, 1)
    print(f"{path}:{line}:{col}: error: {message}", file=sys.stderr)


def _pool_map(function: Callable[..., _T], jobs: list[tuple], workers: int) -> list[_T]:
    """`function(*job)` for every job, in worker processes when there are many.

    Workers are forked: a spawned one would import the `arrayfield` package
    afresh, and forking skips the start-up of a new interpreter.
    """
    if workers <= 1 or len(jobs) < _PARALLEL_THRESHOLD:
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


@dataclasses.dataclass(frozen=True)
class _FileError:
    """Why a file could not be processed, and where (1:1 when nowhere in it)."""

    message: str
    line: int = 1
    col: int = 1


def _index_file(path: str, data: bytes) -> FileFacts | _FileError:
    """Phase 1: the file's facts, or why it does not parse."""
    try:
        return read_file(path, data)
    except SyntaxError as exc:
        return _FileError(f"cannot parse: {exc.msg}", exc.lineno or 1, exc.offset or 1)
    except ValueError as exc:  # null bytes
        return _FileError(f"cannot parse: {exc}")


def _transform_file(
    path: str, data: bytes, context: FileContext, fix: bool, typed: bool
) -> MigrationResult | _FileError:
    """Phase 2: the rewrite and diagnostics of one file, or an error message."""
    import libcst

    from ._transform import migrate_source

    try:
        return migrate_source(data, context, fix=fix, typed=typed)
    except libcst.ParserSyntaxError as exc:
        line, col, message = _syntax_error(data, exc)
        return _FileError(f"cannot parse: {message}", line, col)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        return _FileError(f"cannot decode: {exc}")


def _index_project(
    contents: dict[Path, bytes], outcome: _Outcome, workers: int
) -> ProjectIndex:
    """Index the files that mention equinox, then, until nothing new turns up,
    those that mention a Module class found so far (a subclass in a file that
    imports only the project's own base class) and the modules that files with
    Module classes import from (where the types of their fields are defined)."""
    facts: list[FileFacts] = []
    pending = dict(contents)
    # Module name -> the pending files of that name, one per import root.
    by_module: dict[str, list[Path]] | None = None
    pattern: re.Pattern[bytes] | None = _MENTIONS
    found = [path for path, data in pending.items() if pattern.search(data)]
    searched: set[str] = set()
    while found:
        for path in found:
            del pending[path]
        jobs = [(str(path), contents[path]) for path in found]
        new: list[FileFacts] = []
        for path, result in zip(
            found, _pool_map(_index_file, jobs, workers), strict=True
        ):
            if isinstance(result, _FileError):
                _error(path, result.message, result.line, result.col)
                outcome.errors += 1
            else:
                new.append(result)
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
    return ProjectIndex(facts)


def run(args: argparse.Namespace) -> int:
    """Run `arrayfield migrate` with parsed arguments; returns the exit status."""
    try:
        import libcst  # noqa: F401
    except ModuleNotFoundError:
        print(
            "arrayfield migrate needs libcst: pip install libcst (or install "
            "arrayfield with its migrate extra)",
            file=sys.stderr,
        )
        return EXIT_ERROR

    outcome = _Outcome()
    # Each file once, however it was reached (`pkg ./pkg`, a link to another
    # file of the tree): by its resolved path, under the first name found, or
    # its own name rather than a link's.
    files: dict[Path, Path] = {}
    for given in args.paths:
        path = Path(given)
        if not path.exists():
            _error(given, "no such file or directory")
            outcome.errors += 1
            continue
        for found in python_files(path, args.exclude):
            key = found.resolve()
            kept = files.get(key)
            if kept is None or (kept.is_symlink() and not found.is_symlink()):
                files[key] = found

    contents: dict[Path, bytes] = {}
    for path in files.values():
        try:
            contents[path] = path.read_bytes()
        except OSError as exc:
            _error(path, f"cannot read: {exc.strerror or exc}")
            outcome.errors += 1

    workers = args.jobs or os.cpu_count() or 1
    index = _index_project(contents, outcome, workers)
    # Phase 2 only for files with a Module class, or that import equinox (an
    # alias `Base = eqx.Module`, a `type(...)` class).
    work = [
        path
        for path in contents
        if str(path) in index.files
        and (
            index.module_classes(index.files[str(path)])
            or index.files[str(path)].imports_equinox()
        )
    ]
    jobs = [
        (str(path), contents[path], index.context(str(path)), args.fix, args.typed)
        for path in work
    ]
    progress = _Progress(len(jobs), enabled=not args.quiet)
    results = _pool_map(_transform_file, jobs, workers)
    for path, result in zip(work, results, strict=True):
        progress.step()
        _report_file(path, result, args, outcome)
    progress.done()

    # With --diff, stdout is a patch: nothing else may go there.
    diagnostics_stream = sys.stderr if args.diff else sys.stdout
    for *_, line in sorted(outcome.diagnostics):
        print(line, file=diagnostics_stream)
    if not args.quiet:
        _summarise(len(files), outcome, dry_run=args.check or args.diff)

    if outcome.errors:
        return EXIT_ERROR
    if outcome.changed and (args.check or args.diff):
        return EXIT_CHANGES_PENDING
    return EXIT_OK


class _Progress:
    """A one-line counter on stderr, only on a terminal and for long runs."""

    def __init__(self, total: int, *, enabled: bool) -> None:
        self.total = total
        self.count = 0
        self.enabled = enabled and total >= _PROGRESS_THRESHOLD and sys.stderr.isatty()

    def step(self) -> None:
        self.count += 1
        if self.enabled:
            print(f"\r{self.count}/{self.total} files", end="", file=sys.stderr)

    def done(self) -> None:
        if self.enabled:
            print("\r\033[K", end="", file=sys.stderr)


def _report_file(
    path: Path,
    result: MigrationResult | _FileError,
    args: argparse.Namespace,
    outcome: _Outcome,
) -> None:
    if isinstance(result, _FileError):
        _error(path, result.message, result.line, result.col)
        outcome.errors += 1
        return
    name = str(path)
    lines = source_lines(result.original)
    for d in result.diagnostics:
        if args.fix and d.fixable:
            continue  # made by --fix
        if suppressed(lines, d.line, d.code):
            continue
        outcome.diagnostics.append((name, d.line, d.col, d.format(name)))
    if not result.changed:
        return
    if args.diff:
        # Only the patch goes to stdout (no `would migrate:` line in it).
        sys.stdout.flush()
        sys.stdout.buffer.write(_unified_diff(name, result))
        sys.stdout.buffer.flush()
    elif args.check:
        print(f"would migrate: {name}")
    if args.check or args.diff:
        outcome.changed.append(name)
        return
    try:
        path.write_bytes(result.code.encode(result.encoding))
    except OSError as exc:
        _error(path, f"cannot write: {exc.strerror or exc}")
        outcome.errors += 1
        return
    outcome.changed.append(name)
    if not args.quiet:
        print(f"migrated: {name}")


def _summarise(total: int, outcome: _Outcome, *, dry_run: bool) -> None:
    verb = "would be migrated" if dry_run else "migrated"
    parts = [f"{len(outcome.changed)} of {_count(total, 'file')} {verb}"]
    if outcome.diagnostics:
        parts.append(_count(len(outcome.diagnostics), "diagnostic"))
    if outcome.errors:
        parts.append(_count(outcome.errors, "error"))
    print(", ".join(parts) + ".", file=sys.stderr)


def _count(number: int, noun: str) -> str:
    """`1 file`, `2 files`, `0 files`."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
