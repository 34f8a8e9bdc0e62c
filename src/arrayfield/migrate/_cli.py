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
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ._diagnostics import CODES

if TYPE_CHECKING:
    from ._transform import MigrationResult

EXIT_OK = 0
EXIT_CHANGES_PENDING = 1
EXIT_ERROR = 2

# Directory names never walked into, besides hidden ones (.venv, .git, .tox...).
_SKIPPED_DIRECTORIES = frozenset(
    {"__pycache__", "venv", "node_modules", "site-packages"}
)
# Progress lines appear on stderr when more files than this are processed.
_PROGRESS_THRESHOLD = 5

_DESCRIPTION = """\
Rewrite equinox Module classes to subclass arrayfield's ArrayModule.

Classes whose base is equinox's Module (eqx.Module, equinox.Module, an alias
of `from equinox import Module`) get `af.ArrayModule` instead, `import
arrayfield as af` is added once, and eqx.field(converter=jnp.asarray) on
array-annotated fields is dropped because the base class now converts (the
annotation becomes af.Field[...], which tells type checkers what the converter
told them). With --typed, every converted array field gets af.Field[...]. Every
other byte of a file is kept, files that need no change are not written, and
a second run changes nothing. Directories are searched for *.py files.
"""


def _epilog() -> str:
    codes = "\n".join(
        textwrap.fill(
            f"{code}  {text}", width=79, initial_indent="  ", subsequent_indent=" " * 9
        )
        for code, text in CODES.items()
    )
    return f"""\
diagnostics (printed as path:line:col: CODE message, sorted; they need a human
decision and do not change the exit status):
{codes}

exit status:
  0  nothing to change, or files rewritten
  1  --check or --diff: some files would change
  2  a path could not be read, or a file does not parse (the other files are
     still processed)

See docs/migration.md for the whole migration, step by step.
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


def _python_files(path: Path) -> Iterator[Path]:
    if not path.is_dir():
        yield path
        return
    for root, directories, files in os.walk(path):
        directories[:] = sorted(
            name
            for name in directories
            if not name.startswith(".") and name not in _SKIPPED_DIRECTORIES
        )
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(root, name)


def _unified_diff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=path,
        tofile=path,
    )
    out = []
    for line in lines:
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        out.append(line)
    return "".join(out)


@dataclasses.dataclass
class _Outcome:
    changed: list[str] = dataclasses.field(default_factory=list)
    diagnostics: list[tuple[str, int, int, str]] = dataclasses.field(
        default_factory=list
    )
    errors: int = 0


def _syntax_error(data: bytes, exc: Exception) -> str:
    """Python's own description of a syntax error: it names the line and the
    problem more precisely than libcst's parser does."""
    try:
        compile(data, "<file>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as python_error:
        return f"line {python_error.lineno}: {python_error.msg}"
    except ValueError:  # e.g. null bytes
        pass
    return " ".join(str(getattr(exc, "message", exc)).split())


def _error(path: Path | str, message: str) -> None:
    print(f"{path}: error: {message}", file=sys.stderr)


def _migrate_file(path: Path, args: argparse.Namespace, outcome: _Outcome) -> None:
    import libcst

    from ._transform import migrate_source

    try:
        data = path.read_bytes()
    except OSError as exc:
        _error(path, f"cannot read: {exc.strerror or exc}")
        outcome.errors += 1
        return
    try:
        result: MigrationResult = migrate_source(data, typed=args.typed)
    except libcst.ParserSyntaxError as exc:
        _error(path, f"cannot parse: {_syntax_error(data, exc)}")
        outcome.errors += 1
        return
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        _error(path, f"cannot decode: {exc}")
        outcome.errors += 1
        return

    name = str(path)
    outcome.diagnostics.extend(
        (name, d.line, d.col, d.format(name)) for d in result.diagnostics
    )
    if not result.changed:
        return
    if args.diff:
        sys.stdout.write(_unified_diff(name, result.original, result.code))
    if args.check or args.diff:
        outcome.changed.append(name)
        if args.check:
            print(f"would migrate: {name}")
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


def run(args: argparse.Namespace) -> int:
    """Run `arrayfield migrate` with parsed arguments; returns the exit status."""
    try:
        import libcst  # noqa: F401
    except ModuleNotFoundError:
        print(
            "arrayfield migrate needs libcst: pip install 'arrayfield[migrate]'",
            file=sys.stderr,
        )
        return EXIT_ERROR

    outcome = _Outcome()
    files: dict[Path, None] = {}  # ordered and without repeats
    for given in args.paths:
        path = Path(given)
        if not path.exists():
            _error(given, "no such file or directory")
            outcome.errors += 1
            continue
        files.update(dict.fromkeys(_python_files(path)))

    show_progress = len(files) > _PROGRESS_THRESHOLD and not args.quiet
    for number, path in enumerate(files, start=1):
        if show_progress:
            print(f"[{number}/{len(files)}] {path}", file=sys.stderr, flush=True)
        _migrate_file(path, args, outcome)

    for *_, line in sorted(outcome.diagnostics):
        print(line)
    if not args.quiet:
        _summarise(len(files), outcome, dry_run=args.check or args.diff)

    if outcome.errors:
        return EXIT_ERROR
    if outcome.changed and (args.check or args.diff):
        return EXIT_CHANGES_PENDING
    return EXIT_OK


def _summarise(total: int, outcome: _Outcome, *, dry_run: bool) -> None:
    verb = "would be migrated" if dry_run else "migrated"
    parts = [f"{len(outcome.changed)} of {total} files {verb}"]
    if outcome.diagnostics:
        parts.append(f"{len(outcome.diagnostics)} diagnostics")
    if outcome.errors:
        parts.append(f"{outcome.errors} errors")
    print(", ".join(parts) + ".", file=sys.stderr)
