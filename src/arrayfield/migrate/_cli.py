"""`arrayfield migrate PATH...`: the command line of the codemod (its options,
what it prints for each file, its exit status, and interrupts)."""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import gc
import io
import os
import signal
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

from . import _runner
from ._checks import CODES
from ._runner import CheckResult, FileError
from ._walk import find_files
from ._write import ChangedSinceRead, write_atomically

if TYPE_CHECKING:
    from ._diagnostics import Diagnostic
    from ._splice import MigrationResult

# What each status means is in the epilog.
EXIT_OK = 0
EXIT_CHANGES_PENDING = 1
EXIT_ERROR = 2
EXIT_UNDECIDED = 3
# Interrupted: 128 + the signal's number, as a shell reports a process killed by it.
EXIT_SIGNAL_BASE = 128

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
  2  a path could not be read, a file does not parse, or a file was not
     written (read-only, or edited while the command ran); the other files
     are still processed
  3  --fix: files rewritten, but some field's default may be a Python number
     that now trains (AF007 says which); nothing else went wrong
  130, 143, 129  interrupted (Ctrl-C, SIGTERM, SIGHUP): each file is as it was
     or fully migrated

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
    switch = functools.partial(parser.add_argument, action="store_true")
    switch(
        "--check",
        help="write nothing; list the files that would change and exit 1 if any",
    )
    switch(
        "--diff",
        help="write nothing; print a unified diff of what the same command "
        "without --diff writes (with --fix: what --fix writes), for git apply",
    )
    switch(
        "--fix",
        help="also make the safe edits diagnostics ask for: af.field(convert=False) "
        "on fields used as shapes (AF002) and on numbers that would start to "
        "train (AF007)",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="skip files and directories matching GLOB (repeatable)",
    )
    switch(
        "--typed",
        help="wrap every converted array field's annotation in af.Field[...] (and "
        "write bare defaults as af.field(default=...)), so pyright and mypy accept "
        "the numbers arrayfield converts",
    )
    switch("-q", "--quiet", help="print only diagnostics, diffs and errors")
    parser.set_defaults(run=run)


def _unified_diff(path: str, result: MigrationResult) -> bytes:
    """A patch that `git apply` and `patch -p1` accept from the working
    directory, in the file's own encoding (a byte order mark included)."""
    # Imported here: only --diff needs difflib.
    from ._patch import unified_diff

    name = os.fsencode(Path(os.path.relpath(path)).as_posix())
    # Lines as patch(1) and `git apply` count them: up to each `\n`, so that a
    # lone `\r` or a form feed stays inside its line.
    old, new = (
        io.BytesIO(text.encode(result.encoding)).readlines()
        for text in (result.original, result.code)
    )
    return b"".join(unified_diff(old, new, b"a/" + name, b"b/" + name))


def run(args: argparse.Namespace) -> int:
    """Run `arrayfield migrate` with parsed arguments; returns the exit status."""
    # Python's cycle collector off: the syntax trees and facts of a run hold no
    # reference cycles, and collecting would walk all of them again each time
    # the heap grows by a quarter (a third of the time to parse the benchmark).
    collecting = gc.isenabled()
    gc.disable()
    taken = _stop_on_signals()
    try:
        return _migrate(args)
    except KeyboardInterrupt:
        number = signal.SIGINT
    except _Stopped as stopped:
        number = stopped.args[0]
    finally:
        for taken_number in taken:
            signal.signal(taken_number, signal.SIG_DFL)
        if collecting:
            gc.enable()
    print(
        f"arrayfield migrate: interrupted ({signal.Signals(number).name}); every "
        "file is as it was or fully migrated: run the command again to finish",
        file=sys.stderr,
    )
    return EXIT_SIGNAL_BASE + number


class _Stopped(BaseException):
    """A stop signal arrived, its number the argument (a `BaseException`, as
    KeyboardInterrupt is, so that no `except Exception` takes it for a failed
    job)."""


def _stop(number: int, frame: object) -> None:
    raise _Stopped(number)


def _stop_on_signals() -> list[int]:
    """Make SIGTERM and SIGHUP unwind the run as Ctrl-C does (a temporary file
    being written is removed), where nobody else handles them: not in a program
    that calls `main` with its own handlers, nor from a thread, where Python
    allows none. Returns the signals it took."""
    taken = []
    for name in ("SIGTERM", "SIGHUP"):
        number = getattr(signal, name, None)  # no SIGHUP on Windows
        with contextlib.suppress(ValueError):  # not the main thread
            if number is not None and signal.getsignal(number) == signal.SIG_DFL:
                signal.signal(number, _stop)
                taken.append(number)
    return taken


def _migrate(args: argparse.Namespace) -> int:
    report = _Report(args)
    files, missing = find_files(args.paths, args.exclude)
    for path in missing:
        report.error(FileError(path, "no such file or directory"))
    contents, read_errors = _runner.read_files(files)
    trees: dict[Path, ast.Module] = {}
    index, index_errors = _runner.index_project(contents, trees)
    for error in [*read_errors, *index_errors]:
        report.error(error)
    work = _runner.files_to_rewrite(contents, index)
    results = _runner.rewrite_files(
        work,
        contents,
        index,
        fix=args.fix,
        typed=args.typed,
        text=args.diff or not args.check,
        trees=trees,
    )
    # A one-line counter on stderr, only on a terminal and for long runs.
    progress = (
        not args.quiet and len(work) >= _PROGRESS_THRESHOLD and sys.stderr.isatty()
    )
    for count, (path, result) in enumerate(zip(work, results, strict=True), 1):
        if progress:
            print(f"\r{count}/{len(work)} files", end="", file=sys.stderr)
        report.file(path, result, contents[path])
    if progress:
        print("\r\033[K", end="", file=sys.stderr)
    return report.finish(len(files))


class _Report:
    """What the run prints for each file, and counts for the summary and status."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.changed = 0
        self.errors = 0
        # Each diagnostic to print (not those --fix makes), by path.
        self.diagnostics: list[tuple[str, Diagnostic]] = []

    def error(self, error: FileError) -> None:
        # Python reports some errors (an unknown coding) at column -1 or 0.
        line, col = max(error.line, 1), max(error.col, 1)
        print(f"{error.path}:{line}:{col}: error: {error.message}", file=sys.stderr)
        self.errors += 1

    def file(
        self, path: Path, result: MigrationResult | CheckResult | FileError, read: bytes
    ) -> None:
        if isinstance(result, FileError):
            self.error(result)
            return
        name, args = str(path), self.args
        self.diagnostics += [
            (name, d) for d in result.diagnostics if not (args.fix and d.fixable)
        ]
        if not result.changed:
            return
        if isinstance(result, CheckResult):  # --check alone: no new text is made
            print(f"would migrate: {name}")
        elif args.diff:
            # Only the patch goes to stdout (no `would migrate:` line in it).
            sys.stdout.flush()
            sys.stdout.buffer.write(_unified_diff(name, result))
            sys.stdout.buffer.flush()
        else:
            error = _write(path, result, read)
            if error is not None:
                self.error(FileError(path, error))
                return
            if not args.quiet:
                print(f"migrated: {name}")
        self.changed += 1

    def finish(self, total: int) -> int:
        """Print the diagnostics and the summary; returns the exit status."""
        args, diagnostics = self.args, self.diagnostics
        lines = sorted((name, d.line, d.col, d.format(name)) for name, d in diagnostics)
        # With --diff, stdout is a patch: nothing else may go there. One write
        # for them all: an unbuffered stream (`-u`) makes each print two calls.
        stream = sys.stderr if args.diff else sys.stdout
        stream.write("".join(line + "\n" for *_, line in lines))
        if not args.quiet:
            verb = "would be migrated" if args.check or args.diff else "migrated"
            parts = [f"{self.changed} of {_count(total, 'file')} {verb}"]
            if diagnostics:
                parts.append(_count(len(diagnostics), "diagnostic"))
            # What a preview without --fix leaves out: --fix also edits these.
            fixable = sum(d.fixable for _, d in diagnostics)
            if fixable:
                parts.append(f"{fixable} of them edited by --fix")
            if self.errors:
                parts.append(_count(self.errors, "error"))
            print(", ".join(parts) + ".", file=sys.stderr)
        # Every AF007 message opens with "field 'Class.name'".
        undecided = [
            d.message.split("'")[1] + f" ({name}:{d.line})"
            for name, d in diagnostics
            if d.undecided
        ]
        if self.errors:
            return EXIT_ERROR
        if self.changed and (args.check or args.diff):
            return EXIT_CHANGES_PENDING
        if args.fix and undecided:
            print(
                "--fix could not tell whether these fields held Python numbers, "
                "which now train (AF007 above): " + ", ".join(undecided),
                file=sys.stderr,
            )
            return EXIT_UNDECIDED
        return EXIT_OK


def _write(path: Path, result: MigrationResult, read: bytes) -> str | None:
    """Write the migrated file over `read`; why it was not, if it was not."""
    try:
        write_atomically(path, result.code.encode(result.encoding), expected=read)
    except ChangedSinceRead:
        return "changed since migrate read it; not written (run it again)"
    except PermissionError as exc:
        return f"cannot write: {exc.strerror or exc} (the file is read-only)"
    except OSError as exc:
        return f"cannot write: {exc.strerror or exc}"
    return None


def _count(number: int, noun: str) -> str:
    """`1 file`, `2 files`, `0 files`."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
