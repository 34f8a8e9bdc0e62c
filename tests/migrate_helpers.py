"""Writing a small project and reading `arrayfield migrate`'s report on it,
for the tests of the codemod's project-wide analysis and advice."""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

from helpers import run_cli


def write_tree(root: Path, files: dict[str, str]) -> None:
    """Write each `name: text` (dedented) under `root`, making directories."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def migrate(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`arrayfield migrate -q ARGS` run in `root`."""
    return run_cli("migrate", "-q", *args, cwd=root, timeout=120)


def codes(result: subprocess.CompletedProcess[str]) -> list[str]:
    """`path:line CODE Class.field` for every diagnostic printed."""
    out = []
    for line in result.stdout.splitlines():
        match = re.match(r"(.*?):(\d+):\d+: (AF\d+) (.*)", line)
        if match is None:
            continue
        path, line_number, code, message = match.groups()
        subject = message.split("'")[1] if "'" in message else message.split()[2]
        out.append(f"{Path(path).as_posix()}:{line_number} {code} {subject}")
    return out
