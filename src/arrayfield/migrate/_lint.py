"""What the project's lint configuration says, so the rewrite adds no lint.

Two facts are read: which top-level modules are the project's own (ruff's and
isort's `known-first-party`, plus the packages of the migrated tree), so that
`import arrayfield as af` lands in the third-party section where isort and
ruff's `I` rules put it; and whether the project ignores F722, the
"syntax error in forward annotation" that ruff and pyflakes report for a
jaxtyping shape string such as `Float[Array, ""]`.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path

# Files that hold ruff, isort or flake8 settings, nearest first in a directory.
_CONFIG_FILES = (
    "ruff.toml",
    ".ruff.toml",
    "pyproject.toml",
    ".isort.cfg",
    "setup.cfg",
    ".flake8",
    "tox.ini",
)
STDLIB = frozenset(sys.stdlib_module_names) | {"__future__"}


@dataclasses.dataclass(frozen=True)
class LintConfig:
    """**Fields:**

    - `first_party`: top-level module names isort treats as first-party.
    - `found`: whether a ruff, isort or flake8 configuration file was found.
    - `ignores_f722`: whether it names F722 (in an ignore list).
    """

    first_party: frozenset[str] = frozenset()
    found: bool = False
    ignores_f722: bool = False


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [part.strip() for part in value.replace("\n", ",").split(",")]
    if isinstance(value, list):
        return [str(item) for item in value]
    return []


def _from_toml(text: str, pyproject: bool) -> tuple[bool, set[str], bool] | None:
    """(has settings, known first-party modules, F722 ignored), or None when
    the file cannot be read as TOML (Python 3.10 has no tomllib)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        return None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    tool = data.get("tool", {}) if pyproject else {"ruff": data}
    ruff = tool.get("ruff", {})
    lint = ruff.get("lint", {})
    isort_tables = [lint.get("isort", {}), ruff.get("isort", {})]
    known = {
        name
        for table in isort_tables
        for name in _strings(table.get("known-first-party"))
    }
    isort = tool.get("isort", {})
    known |= set(_strings(isort.get("known_first_party")))
    ignores = [
        code
        for table in (ruff, lint)
        for key in ("ignore", "extend-ignore")
        for code in _strings(table.get(key))
    ]
    has = bool(ruff or isort)
    return has, known, any(code.startswith("F722") for code in ignores)


def _from_ini(text: str) -> tuple[bool, set[str], bool]:
    """setup.cfg, .flake8, tox.ini, .isort.cfg: read loosely, by their lines."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return False, set(), False
    known: set[str] = set()
    has, ignores = False, False
    for section in parser.sections():
        if section in ("isort", "tool:isort", "settings"):
            has = True
            known |= set(_strings(parser[section].get("known_first_party", "")))
        if section == "flake8":
            has = True
            for key in ("ignore", "extend-ignore", "extend_ignore"):
                if "F722" in parser[section].get(key, ""):
                    ignores = True
    return has, known, ignores


@functools.cache
def config_for(directory: Path) -> LintConfig:
    """The settings that apply to files in `directory`: those of the nearest
    configuration file above it that has any."""
    for folder in (directory, *directory.parents):
        for name in _CONFIG_FILES:
            path = folder / name
            if not path.is_file():
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if name.endswith(".toml"):
                read = _from_toml(text, pyproject=name == "pyproject.toml")
                if read is None:
                    # Unreadable here: assume it may ignore F722, say nothing.
                    return LintConfig(found=True, ignores_f722=True)
            else:
                read = _from_ini(text)
            has, known, ignores = read
            if has:
                return LintConfig(frozenset(known), True, ignores)
        if (folder / ".git").exists():
            break
    return LintConfig()
