"""Which files `arrayfield migrate` looks at: a directory walk with the skips
users expect from ruff and black, and the `.gitignore` features source trees
use (comments, `!`, `/` anchoring, a trailing `/` for directories only, `*`,
`?`, `[...]`, `**`). A file named on the command line is always taken.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

# Directory names never walked into, besides hidden ones (.venv, .git, .tox...).
SKIPPED_DIRECTORIES = frozenset(
    {"__pycache__", "venv", "node_modules", "site-packages", "build", "dist"}
)

# One piece of a .gitignore pattern: a wildcard, a `[...]` class, an escaped
# character or any other one.
_GLOB_PIECE = re.compile(r"\*\*/|\*\*|\*|\?|\[[^\]]*\]|\\.|.", re.DOTALL)
_WILDCARDS = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}


def _piece_regex(piece: str) -> str:
    if piece in _WILDCARDS:
        return _WILDCARDS[piece]
    if piece.startswith("[") and len(piece) > 1:
        body = piece[1:-1].replace("\\", "\\\\")
        return f"[^{body[1:]}]" if body.startswith("!") else f"[{body}]"
    return re.escape(piece[-1])


class _Rule:
    def __init__(self, pattern: str) -> None:
        self.negated = pattern.startswith("!")
        pattern = pattern.removeprefix("!")
        self.directory_only = pattern.endswith("/")
        pattern = pattern.rstrip("/")
        # A slash anywhere but at the end anchors the pattern to its directory.
        self.anchored = "/" in pattern
        pieces = _GLOB_PIECE.findall(pattern.lstrip("/"))
        self.regex = re.compile("".join(map(_piece_regex, pieces)) + r"\Z")

    def matches(self, relative: str, is_dir: bool) -> bool:
        if self.directory_only and not is_dir:
            return False
        name = relative if self.anchored else relative.rpartition("/")[2]
        return self.regex.match(name) is not None


class GitIgnore:
    """The rules of the `.gitignore` files seen so far, by the directory
    holding them; later rules and deeper files win, as in git."""

    def __init__(self) -> None:
        self._rules: list[tuple[Path, list[_Rule]]] = []

    def load(self, directory: Path) -> None:
        try:
            text = (directory / ".gitignore").read_text(errors="replace")
        except OSError:
            return
        lines = [line.rstrip() for line in text.split("\n")]  # rstrip drops a \r
        rules = [_Rule(line) for line in lines if line and not line.startswith("#")]
        if rules:
            self._rules.append((directory, rules))

    def ignored(self, path: Path, is_dir: bool) -> bool:
        verdict = False
        for directory, rules in self._rules:
            try:
                relative = path.relative_to(directory).as_posix()
            except ValueError:
                continue
            for rule in rules:
                if rule.matches(relative, is_dir):
                    verdict = not rule.negated
        return verdict


class _Excludes:
    """`--exclude` globs, matched against a path as walked (`src/pkg/data`), its
    name, any trailing part of it, and its resolved absolute path; `./data`,
    `data/` and `/abs/path/to/data` are spelled the way shells complete them."""

    def __init__(self, globs: Sequence[str]) -> None:
        self.globs = []
        for glob in globs:
            glob = glob.replace(os.sep, "/").rstrip("/") or "/"
            while glob.startswith("./"):
                glob = glob[2:].lstrip("/")
            self.globs.append(glob)
        # Relative to the working directory, as the shell completed them.
        self.absolute = [Path(os.path.abspath(glob)).as_posix() for glob in self.globs]

    def __call__(self, path: Path) -> bool:
        if not self.globs:
            return False
        text = path.as_posix()
        if any(
            fnmatch.fnmatch(text, glob)
            or fnmatch.fnmatch(path.name, glob)
            or fnmatch.fnmatch(text, f"*/{glob}")
            for glob in self.globs
        ):
            return True
        resolved = {Path(os.path.abspath(path)).as_posix(), path.resolve().as_posix()}
        return any(
            fnmatch.fnmatch(candidate, glob)
            for glob in self.absolute
            for candidate in resolved
        )


def find_files(
    paths: Sequence[str], excludes: Sequence[str]
) -> tuple[list[Path], list[str]]:
    """The Python files under `paths`, each once however it was reached
    (`pkg ./pkg`, a link): under the first name found, or its own name rather
    than a link's; and the paths that do not exist."""
    missing: list[str] = []
    files: dict[tuple[int, int] | Path, Path] = {}
    for given in paths:
        path = Path(given)
        if not path.exists():
            missing.append(given)
            continue
        for found in _python_files(path, excludes) if path.is_dir() else [path]:
            key = _identity(found)
            kept = files.get(key)
            if kept is None or (kept.is_symlink() and not found.is_symlink()):
                files[key] = found
    return list(files.values()), missing


def _identity(path: Path) -> tuple[int, int] | Path:
    """The file a path reaches: its device and inode (one `stat`, where
    resolving reads every directory above it), else (a broken link, a file
    system without inode numbers) its resolved path."""
    try:
        stat = os.stat(path)
    except OSError:  # reading it reports the error
        return path.resolve()
    return (stat.st_dev, stat.st_ino) if stat.st_ino else path.resolve()


def _python_files(path: Path, excludes: Sequence[str]) -> Iterator[Path]:
    """The `*.py` files under a directory, sorted, minus hidden ones (editor
    lock files such as `.#model.py`), links to nothing, build directories,
    virtual environments (holding `pyvenv.cfg`), `.gitignore`d paths and
    `excludes` globs."""
    excluded = _Excludes(excludes)
    gitignore = GitIgnore()
    absolute = path.resolve()
    # The .gitignore files above the walked directory, up to its repository's
    # root, apply to it too.
    for root in (absolute, *absolute.parents):
        if (root / ".git").exists():
            for parent in reversed(absolute.relative_to(root).parents):
                gitignore.load(root / parent)
            break

    def skipped(child: Path, resolved: Path, is_dir: bool) -> bool:
        return (
            child.name.startswith(".")
            or excluded(child)
            or gitignore.ignored(resolved / child.name, is_dir=is_dir)
        )

    for current, directories, files in os.walk(path):
        here = Path(current)
        # .gitignore rules match a path as the tree has it: its directory
        # resolved (once, not once per file), its own name as it is.
        resolved = here.resolve()
        gitignore.load(resolved)
        directories[:] = [
            name
            for name in sorted(directories)
            if name not in SKIPPED_DIRECTORIES
            and not skipped(here / name, resolved, is_dir=True)
            and not (here / name / "pyvenv.cfg").exists()
        ]
        for name in sorted(files):
            child = here / name
            # exists(): not a link to nothing
            if (
                name.endswith(".py")
                and not skipped(child, resolved, is_dir=False)
                and child.exists()
            ):
                yield child
