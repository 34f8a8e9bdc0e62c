"""The README's promises about how to run things are the ones CI keeps."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def bash_commands(text: str) -> list[str]:
    return [
        line
        for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S)
        for line in block.splitlines()
        if line.startswith("python3 -m venv")
    ]


def test_readme_has_exactly_two_setup_commands_example_and_tests():
    commands = bash_commands((ROOT / "README.md").read_text())
    assert len(commands) == 2
    assert commands[0].endswith("examples/scene_fit.py")
    assert commands[1].endswith("-m pytest")


def test_ci_runs_the_readme_test_command_verbatim():
    test_command = bash_commands((ROOT / "README.md").read_text())[1]
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_command in ci_lines
