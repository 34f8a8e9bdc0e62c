"""What the project's lint configuration says, so the rewrite adds no lint.

Two facts are read: which top-level modules are the project's own (ruff's and
isort's `known-first-party`, plus the packages of the migrated tree), so that
`import arrayfield as af` lands in the third-party section where isort and
ruff's `I` rules put it; and whether the project ignores F722, the
"syntax error in forward annotation" that ruff and pyflakes report for a
jaxtyping shape string such as `Float[Array, ""]`.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import NamedTuple

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


class LintConfig(NamedTuple):
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


def _from_toml(text: str, pyproject: bool) -> LintConfig | None:
    """The settings of a TOML file, or None when it has none."""
    try:
        import tomllib

        data = tomllib.loads(text)
    except (ModuleNotFoundError, ValueError):  # Python 3.10; a TOMLDecodeError
        # Unreadable here: assume it may ignore F722, say nothing.
        return LintConfig(found=True, ignores_f722=True)
    tool = data.get("tool", {}) if pyproject else {"ruff": data}
    ruff, isort = tool.get("ruff", {}), tool.get("isort", {})
    if not (ruff or isort):
        return None
    lint = ruff.get("lint", {})
    known = {
        name
        for table in (lint.get("isort", {}), ruff.get("isort", {}))
        for name in _strings(table.get("known-first-party"))
    }
    known |= set(_strings(isort.get("known_first_party")))
    ignores = [
        code
        for table in (ruff, lint)
        for key in ("ignore", "extend-ignore")
        for code in _strings(table.get(key))
    ]
    f722 = any(code.startswith("F722") for code in ignores)
    return LintConfig(frozenset(known), True, f722)


def _from_ini(text: str) -> LintConfig | None:
    """setup.cfg, .flake8, tox.ini, .isort.cfg, read loosely by their lines:
    their settings, or None when they have none."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    known: set[str] = set()
    found, ignores = False, False
    for section in parser.sections():
        if section in ("isort", "tool:isort", "settings"):
            found = True
            known |= set(_strings(parser[section].get("known_first_party", "")))
        if section == "flake8":
            found = True
            for key in ("ignore", "extend-ignore", "extend_ignore"):
                if "F722" in parser[section].get(key, ""):
                    ignores = True
    return LintConfig(frozenset(known), True, ignores) if found else None


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
                config = _from_toml(text, pyproject=name == "pyproject.toml")
            else:
                config = _from_ini(text)
            if config is not None:
                return config
        if (folder / ".git").exists():
            break
    return LintConfig()
