"""Which files `arrayfield migrate` looks at: directory walking with the skips
users expect from ruff and black, and `.gitignore` matching.

Only the `.gitignore` features source trees use are implemented: comments,
`!` negation, `/` anchoring, a trailing `/` for directories only, and the `*`,
`?`, `[...]` and `**` wildcards. Files named on the command line are always
taken; only what a directory walk finds is filtered.
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


class _Rule:
    def __init__(self, pattern: str) -> None:
        self.negated = pattern.startswith("!")
        if self.negated:
            pattern = pattern[1:]
        self.directory_only = pattern.endswith("/")
        pattern = pattern.rstrip("/")
        # A slash anywhere but at the end anchors the pattern to its directory.
        self.anchored = "/" in pattern
        self.regex = re.compile(_translate(pattern.lstrip("/")) + r"\Z")

    def matches(self, relative: str, is_dir: bool) -> bool:
        if self.directory_only and not is_dir:
            return False
        if self.anchored:
            return self.regex.match(relative) is not None
        return self.regex.match(relative.rpartition("/")[2]) is not None


def _translate(pattern: str) -> str:
    out = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if pattern.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", index + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = pattern[index + 1 : end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                index = end
        elif char == "\\" and index + 1 < len(pattern):
            index += 1
            out.append(re.escape(pattern[index]))
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


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
        rules = []
        for line in text.split("\n"):  # git's line break; rstrip drops a \r
            line = line.rstrip()
            if line and not line.startswith("#"):
                rules.append(_Rule(line))
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


def python_files(path: Path, excludes: Sequence[str] = ()) -> Iterator[Path]:
    """`path` itself if it is a file, else the `*.py` files under it, sorted,
    minus hidden files and directories (editor lock files such as `.#model.py`
    among them), symbolic links to nothing, build directories, virtual
    environments (any directory holding `pyvenv.cfg`), `.gitignore`d paths and
    `excludes` globs."""
    if not path.is_dir():
        yield path
        return
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
