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
    assert commands[1].endswith("-m pytest -n auto")


def test_ci_runs_both_readme_commands_verbatim():
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    for command in bash_commands((ROOT / "README.md").read_text()):
        assert command in ci_lines


def test_ci_runs_every_example():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "for example in examples/*.py; do" in ci
    assert '.venv/bin/python "$example"' in ci


def test_every_example_is_linked_from_the_readme_and_every_link_exists():
    readme = (ROOT / "README.md").read_text()
    linked = set(re.findall(r"\]\((examples/[^)]+)\)", readme))
    examples = {f"examples/{path.name}" for path in (ROOT / "examples").glob("*.py")}
    assert linked == examples


def test_readme_can_be_skimmed_in_two_minutes():
    assert len((ROOT / "README.md").read_text()) < 10_000


def test_readme_and_docs_index_give_the_same_first_install_command():
    def first_install(page: str) -> str:
        text = (ROOT / page).read_text()
        return next(
            line
            for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S)
            for line in block.splitlines()
            if "pip install" in line
        )

    assert first_install("README.md") == first_install("docs/index.md")


def test_readme_and_docs_index_say_how_to_get_the_code_and_build_a_wheel():
    for page in ("README.md", "docs/index.md"):
        text = " ".join((ROOT / page).read_text().split())
        assert "has no public home yet" in text, page
        assert "pip wheel --no-deps -w dist ." in text, page


def test_every_relative_link_in_the_readme_points_at_a_file():
    # A package index renders the README away from the repository: CONTRIBUTING.md
    # ("Publishing") says how these become absolute links; each needs a target.
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    relative = [link for link in links if not link.startswith(("http://", "https://"))]
    assert relative
    missing = [link for link in relative if not (ROOT / link).exists()]
    assert not missing, missing


def test_where_the_test_command_is_the_chromium_that_no_extra_installs_is_named():
    # The docs-search tests skip without apt's Chromium, which the `test` extra
    # cannot install: the pages that give the test command say so.
    install = "apt-get install chromium chromium-driver"
    assert install in (ROOT / "tests" / "test_docs_search.py").read_text()
    readme = (ROOT / "README.md").read_text()
    try_it = readme.split("## Try it", 1)[1].split("\n## ", 1)[0]
    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    for page, text in (
        ("README.md, Try it", try_it),
        ("CONTRIBUTING.md", contributing),
    ):
        assert install in " ".join(text.split()), page
        assert "-m pytest" in text, page
