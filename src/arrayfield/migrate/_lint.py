"""What the project's lint configuration says, so the rewrite adds no lint:
the modules ruff and isort take as first-party (`known-first-party`), so that
`import arrayfield as af` lands in the section they put it in, and whether the
project ignores F722, which ruff and pyflakes report for a jaxtyping shape
string such as `Float[Array, ""]`.
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
    first_party: frozenset[str] = frozenset()
    # Whether a ruff, isort or flake8 configuration file was found.
    found: bool = False
    ignores_f722: bool = False


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [part.strip() for part in value.replace("\n", ",").split(",")]
    if isinstance(value, list):
        return [str(item) for item in value]
    return []


def _from_toml(text: str, pyproject: bool) -> LintConfig | None:
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
    known = [
        *_strings(lint.get("isort", {}).get("known-first-party")),
        *_strings(ruff.get("isort", {}).get("known-first-party")),
        *_strings(isort.get("known_first_party")),
    ]
    ignores = [
        code
        for table in (ruff, lint)
        for key in ("ignore", "extend-ignore")
        for code in _strings(table.get(key))
    ]
    f722 = any(code.startswith("F722") for code in ignores)
    return LintConfig(frozenset(known), True, f722)


def _from_ini(text: str) -> LintConfig | None:
    """setup.cfg, .flake8, tox.ini and .isort.cfg."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    isort = [name for name in ("isort", "tool:isort", "settings") if name in parser]
    if not isort and "flake8" not in parser:
        return None
    known = [
        name
        for section in isort
        for name in _strings(parser.get(section, "known_first_party", fallback=""))
    ]
    ignores = ("ignore", "extend-ignore", "extend_ignore")
    f722 = any("F722" in parser.get("flake8", key, fallback="") for key in ignores)
    return LintConfig(frozenset(known), True, f722)


@functools.cache
def config_for(directory: Path) -> LintConfig:
    """The settings of the nearest configuration file above `directory` that
    has any, up to the repository's root."""
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
