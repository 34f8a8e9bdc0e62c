"""`arrayfield migrate` as a user runs it: a real subprocess on copies of files."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ENV, run_cli, run_code

GOLDEN = Path(__file__).parent / "migrate_golden"


def run_migrate(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("migrate", *args, cwd=cwd, timeout=120)


def copy_case(case: str, destination: Path) -> Path:
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_bytes((GOLDEN / f"{case}_in.py").read_bytes())
    return destination


def expected(case: str) -> bytes:
    return (GOLDEN / f"{case}_out.py").read_bytes()


def test_migrate_rewrites_files_in_place_and_names_them(tmp_path):
    copy_case("eqx_alias", tmp_path / "pkg" / "source.py")
    copy_case("unrelated", tmp_path / "pkg" / "config.py")

    result = run_migrate("pkg", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"migrated: {Path('pkg', 'source.py')}\n"
    assert (tmp_path / "pkg" / "source.py").read_bytes() == expected("eqx_alias")
    assert (tmp_path / "pkg" / "config.py").read_bytes() == expected("unrelated")


def test_second_run_changes_nothing(tmp_path):
    copy_case("from_import", tmp_path / "model.py")
    assert run_migrate("model.py", cwd=tmp_path).returncode == 0
    after_first = (tmp_path / "model.py").read_bytes()

    result = run_migrate("model.py", cwd=tmp_path)

    assert result.returncode == 0
    assert result.stdout == ""
    assert (tmp_path / "model.py").read_bytes() == after_first


def test_check_lists_pending_files_writes_nothing_and_exits_1(tmp_path):
    path = copy_case("nested", tmp_path / "model.py")
    copy_case("unrelated", tmp_path / "other.py")
    before = path.read_bytes()

    result = run_migrate("--check", ".", cwd=tmp_path)

    assert result.returncode == 1
    assert result.stdout == f"would migrate: {Path('.', 'model.py')}\n"
    assert path.read_bytes() == before


def test_check_exits_0_when_nothing_would_change(tmp_path):
    (tmp_path / "done.py").write_bytes(expected("eqx_alias"))
    result = run_migrate("--check", "done.py", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout == ""


def test_diff_prints_unified_diff_and_writes_nothing(tmp_path):
    path = copy_case("custom_alias", tmp_path / "spectrum.py")
    before = path.read_bytes()

    result = run_migrate("--diff", "spectrum.py", cwd=tmp_path)

    assert result.returncode == 1
    assert result.stdout.startswith("--- a/spectrum.py\n+++ b/spectrum.py\n@@ ")
    assert "-class Spectrum(e.Module, strict=True):\n" in result.stdout
    assert "+class Spectrum(af.ArrayModule, strict=True):\n" in result.stdout
    assert "+import arrayfield as af\n" in result.stdout
    assert "would migrate" not in result.stdout
    assert path.read_bytes() == before


def test_unparsable_file_exits_2_while_the_others_still_migrate(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("class Broken(eqx.Module:\n    x: int\n")
    good = copy_case("decorated", tmp_path / "good.py")

    result = run_migrate("broken.py", "good.py", cwd=tmp_path)

    assert result.returncode == 2
    errors = result.stderr.splitlines()
    assert re.fullmatch(r"broken\.py:1:\d+: error: cannot parse: .+", errors[0])
    assert "migrated: good.py" in result.stdout
    assert good.read_bytes() == expected("decorated")
    assert broken.read_text() == "class Broken(eqx.Module:\n    x: int\n"


def test_syntax_error_is_reported_at_its_line_and_column(tmp_path):
    (tmp_path / "bad.py").write_text("import equinox as eqx\n\n\n\ny = = 3\n")

    result = run_migrate("--quiet", "bad.py", cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr == "bad.py:5:5: error: cannot parse: invalid syntax\n"
    assert result.stdout == ""


def test_missing_path_exits_2_with_one_line_message(tmp_path):
    copy_case("decorated", tmp_path / "good.py")

    result = run_migrate("nowhere.py", "good.py", "--quiet", cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr == "nowhere.py:1:1: error: no such file or directory\n"
    assert (tmp_path / "good.py").read_bytes() == expected("decorated")


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0,
    reason="root can read files without read permission",
)
def test_unreadable_file_exits_2(tmp_path):
    path = copy_case("decorated", tmp_path / "secret.py")
    path.chmod(0)
    try:
        result = run_migrate("secret.py", cwd=tmp_path)
    finally:
        path.chmod(0o644)
    assert result.returncode == 2
    assert result.stderr.startswith("secret.py:1:1: error: cannot read: ")


def test_files_needing_no_change_are_not_written(tmp_path):
    untouched = copy_case("unrelated", tmp_path / "untouched.py")
    done = tmp_path / "done.py"
    done.write_bytes(expected("eqx_alias"))
    copy_case("nested", tmp_path / "changed.py")
    long_ago = 1_000_000_000
    for path in (untouched, done):
        os.utime(path, ns=(long_ago * 10**9, long_ago * 10**9))

    result = run_migrate(".", cwd=tmp_path)

    assert result.returncode == 0
    assert untouched.stat().st_mtime_ns == long_ago * 10**9
    assert done.stat().st_mtime_ns == long_ago * 10**9
    assert result.stdout == f"migrated: {Path('.', 'changed.py')}\n"


@pytest.mark.parametrize("flag", ["--quiet", "-q"])
def test_quiet_prints_neither_file_names_nor_summary(flag, tmp_path):
    for index in range(7):
        copy_case("decorated", tmp_path / f"m{index}.py")

    result = run_migrate(flag, ".", cwd=tmp_path)

    assert result.returncode == 0
    assert result.stdout == ""
    assert result.stderr == ""
    assert (tmp_path / "m6.py").read_bytes() == expected("decorated")


def test_no_per_file_progress_lines_off_a_terminal(tmp_path):
    for index in range(30):
        copy_case("decorated", tmp_path / f"m{index}.py")

    result = run_migrate(".", cwd=tmp_path)

    assert result.stderr == "30 of 30 files migrated.\n"
    assert len(result.stdout.splitlines()) == 30  # one `migrated:` line a file


def test_directory_walk_skips_hidden_cache_and_virtualenv_folders(tmp_path):
    for folder in (".hidden", "__pycache__", ".venv", "venv", "build", "dist"):
        copy_case("decorated", tmp_path / "src" / folder / "model.py")
    copy_case("decorated", tmp_path / "src" / "env311" / "lib" / "model.py")
    (tmp_path / "src" / "env311" / "pyvenv.cfg").write_text("home = /usr\n")
    copy_case("decorated", tmp_path / "src" / "lib" / "site-packages" / "model.py")
    copy_case("decorated", tmp_path / "src" / "pkg" / "model.py")
    (tmp_path / "src" / "pkg" / "notes.txt").write_text("class A(eqx.Module): ...")

    result = run_migrate("--check", "src", cwd=tmp_path)

    assert result.stdout == f"would migrate: {Path('src', 'pkg', 'model.py')}\n"


def test_directory_walk_respects_gitignore_and_exclude(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text(
        "# generated\n/src/generated/\n*_pb2.py\nscratch*\n!scratch_keep.py\n"
    )
    names = [
        "generated/model.py",
        "api_pb2.py",
        "scratch_a.py",
        "scratch_keep.py",
        "vendored/thing.py",
        "pkg/model.py",
    ]
    for name in names:
        copy_case("decorated", tmp_path / "src" / name)

    result = run_migrate("--check", "--exclude", "vendored", "src", cwd=tmp_path)

    assert result.stdout.splitlines() == [
        f"would migrate: {Path('src', 'scratch_keep.py')}",
        f"would migrate: {Path('src', 'pkg', 'model.py')}",
    ]


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links need privileges")
def test_gitignore_matches_a_link_by_its_own_name_as_git_does(tmp_path):
    """git tracks a link under its own path, so a rule for the file it points
    to does not ignore it (and a rule for the link's name does)."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("target.py\nskipped_link.py\n")
    target = copy_case("decorated", tmp_path / "src" / "target.py")
    (tmp_path / "src" / "link.py").symlink_to(target)
    (tmp_path / "src" / "skipped_link.py").symlink_to(target)

    result = run_migrate("--check", "src", cwd=tmp_path)

    assert result.stdout == f"would migrate: {Path('src', 'link.py')}\n"


def test_a_file_named_on_the_command_line_is_always_taken(tmp_path):
    copy_case("decorated", tmp_path / "build" / "model.py")
    result = run_migrate("--check", Path("build", "model.py"), cwd=tmp_path)
    assert result.stdout == f"would migrate: {Path('build', 'model.py')}\n"


def test_diagnostics_are_sorted_and_leave_the_exit_status_alone(tmp_path):
    # b.py is named first on the command line; a.py must still come first.
    copy_case("diagnostics", tmp_path / "b.py")
    (tmp_path / "a.py").write_text(
        "import equinox as eqx\n\n\nclass A(eqx.Module):\n    rate: float\n"
    )

    result = run_migrate("--quiet", "b.py", "a.py", cwd=tmp_path)

    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("a.py:5:5: AF001 field 'A.rate' is annotated `float`")
    expected_b = (GOLDEN / "diagnostics_diag.txt").read_text().splitlines()
    assert lines[1:] == [f"b.py:{line}" for line in expected_b]


def test_diff_puts_only_the_diff_on_stdout_and_diagnostics_on_stderr(tmp_path):
    copy_case("diagnostics", tmp_path / "model.py")

    result = run_migrate("--diff", "model.py", cwd=tmp_path)

    assert result.returncode == 1
    assert result.stdout.startswith("--- a/model.py\n+++ b/model.py\n@@ ")
    assert all(line[:1] in " +-@\\" for line in result.stdout.splitlines())
    assert "model.py:" in result.stderr and " AF00" in result.stderr


@pytest.mark.parametrize(
    ("files", "summary"),
    [
        (["decorated"], "1 of 1 file migrated."),
        (["decorated", "unrelated"], "1 of 2 files migrated."),
        (["diagnostics"], "1 of 1 file migrated, {n} diagnostics."),
    ],
)
def test_summary_counts_in_the_right_number(files, summary, tmp_path):
    for index, case in enumerate(files):
        copy_case(case, tmp_path / f"m{index}.py")

    result = run_migrate(".", cwd=tmp_path)

    diagnostics = [line for line in result.stdout.splitlines() if " AF00" in line]
    assert result.stderr.splitlines()[-1] == summary.format(n=len(diagnostics))


def test_summary_says_one_error_and_one_diagnostic_in_the_singular(tmp_path):
    (tmp_path / "a.py").write_text(
        "import equinox as eqx\n\n\nclass A(eqx.Module):\n    rate: float\n"
    )

    result = run_migrate("a.py", "nowhere.py", cwd=tmp_path)

    assert result.stderr.splitlines()[-1] == (
        "1 of 1 file migrated, 1 diagnostic, 1 error."
    )


def run_arrayfield(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, timeout=120)


def test_version_prints_the_package_version(tmp_path):
    import arrayfield

    result = run_arrayfield("--version", cwd=tmp_path)

    assert result.returncode == 0
    assert result.stdout == f"arrayfield {arrayfield.__version__}\n"


def test_unknown_option_shows_the_subcommands_usage(tmp_path):
    result = run_migrate("--frobnicate", "model.py", cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr.startswith("usage: arrayfield migrate [-h] [--check]")
    assert result.stderr.endswith(
        "arrayfield migrate: error: unrecognized arguments: --frobnicate\n"
    )


def test_help_names_a_migration_guide_that_exists(tmp_path):
    result = run_migrate("--help", cwd=tmp_path)

    guide = result.stdout.rsplit("The whole migration, step by step: ", 1)[1].strip()
    assert Path(guide).is_file() and guide.endswith("migration.md")


def test_help_documents_diagnostic_codes_and_exit_statuses(tmp_path):
    result = run_migrate("--help", cwd=tmp_path)
    assert result.returncode == 0
    for code in ("AF001", "AF002", "AF003", "AF004"):
        assert code in result.stdout
    assert "exit status:" in result.stdout
    assert "do not change the exit status" in result.stdout


SCENE_BEFORE = """\
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


class Source(eqx.Module):
    flux: Float[Array, ""]
    position: jax.Array = eqx.field(converter=jnp.asarray)


class Scene(eqx.Module):
    sources: tuple
    step: jax.Array  # a counter callers start at Python 0
    exposure: Float[Array, ""] = eqx.field(default=1.0)


def advance(scene: Scene) -> Scene:
    return Scene(scene.sources, int(scene.step) + 1, float(scene.exposure) * 1.5)
"""


def _import_from(path: Path, name: str, monkeypatch: pytest.MonkeyPatch):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def _count_traces(scene_module, steps: int = 20) -> int:
    import equinox as eqx

    traces = []

    @eqx.filter_jit
    def brightness(scene):
        traces.append(None)  # runs only while tracing
        return sum(s.flux for s in scene.sources) * scene.exposure + scene.step

    source = scene_module.Source(2.0, [0.0, 1.0])
    scene = scene_module.Scene((source,), 0)
    for _ in range(steps):
        brightness(scene)
        scene = scene_module.advance(scene)
    return len(traces)


def test_migrated_scene_is_array_module_and_traces_once(tmp_path, monkeypatch):
    import arrayfield as af

    (tmp_path / "scene_before.py").write_text(SCENE_BEFORE)
    (tmp_path / "scene_after.py").write_text(SCENE_BEFORE)
    result = run_migrate("scene_after.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr

    before = _import_from(tmp_path / "scene_before.py", "scene_before", monkeypatch)
    after = _import_from(tmp_path / "scene_after.py", "scene_after", monkeypatch)

    assert issubclass(after.Source, af.ArrayModule)
    assert issubclass(after.Scene, af.ArrayModule)
    # Python scalars in the old classes are new static values every step.
    assert _count_traces(before) == 20
    assert _count_traces(after) == 1


def test_the_command_never_imports_jax(tmp_path):
    copy_case("diagnostics", tmp_path / "model.py")
    script = (
        "import sys, runpy\n"
        "sys.argv = ['arrayfield', 'migrate', '--check', 'model.py']\n"
        "try:\n"
        "    runpy.run_module('arrayfield', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('jax', 'equinox', 'jaxtyping')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    result = run_code(script, cwd=tmp_path, timeout=120)
    assert result.stdout.splitlines()[-1] == "[]", result.stderr
    assert " AF001 " in result.stdout


FORM_FEED_SOURCE = (
    b"import equinox as eqx\n\n\x0c\n\nclass N(eqx.Module):\n"
    b"    a: float  # noqa: AF001\n    b: float\n    c: float  # NO"
    b"QA\n"
)
ENCODED_SOURCES = {
    "ff.py": FORM_FEED_SOURCE,
    "crlf.py": b"import equinox as eqx\r\nimport jax\r\n\r\n\r\n"
    b"class A(eqx.Module):\r\n    x: jax.Array\r\n",
    "bom.py": b"\xef\xbb\xbfimport equinox as eqx\nimport jax\n\n\n"
    b"class C(eqx.Module):\n    x: jax.Array\n",
    "latin.py": b"# -*- coding: latin-1 -*-\nimport equinox as eqx\nimport jax\n\n"
    b"# caf\xe9\nclass B(eqx.Module):\n    x: jax.Array  # \xe9t\xe9\n"
    b'    label: str = "\xe9"\n',
}


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_diff_is_a_patch_git_applies_whatever_the_line_breaks_and_encoding(tmp_path):
    patched, migrated = tmp_path / "patched", tmp_path / "migrated"
    for folder in (patched, migrated):
        folder.mkdir()
        for name, data in ENCODED_SOURCES.items():
            (folder / name).write_bytes(data)

    # Bytes, not text: the patch is in each file's own encoding.
    diff = subprocess.run(
        [sys.executable, "-m", "arrayfield", "migrate", "--check", "--diff", "."],
        capture_output=True,
        cwd=patched,
        env=ENV,
        timeout=120,
    )
    assert diff.returncode == 1, diff.stderr
    assert b"would migrate" not in diff.stdout
    (tmp_path / "m.patch").write_bytes(diff.stdout)
    applied = subprocess.run(
        ["git", "apply", "-v", "../m.patch"], capture_output=True, cwd=patched
    )
    assert applied.returncode == 0, applied.stderr
    assert run_migrate(".", cwd=migrated).returncode == 0

    for name in ENCODED_SOURCES:
        assert (patched / name).read_bytes() == (migrated / name).read_bytes(), name
    assert (patched / "ff.py").read_bytes().count(b"\x0c") == 1
    assert (patched / "bom.py").read_bytes().startswith(b"\xef\xbb\xbfimport arrayf")


def test_noqa_is_matched_on_the_reported_line_after_a_form_feed(tmp_path):
    (tmp_path / "ff.py").write_bytes(FORM_FEED_SOURCE)

    result = run_migrate("--check", "ff.py", cwd=tmp_path)

    # `a` has a no-qa comment naming AF001, `c` a bare upper-case one: only `b`
    # is reported.
    diagnostics = [line for line in result.stdout.splitlines() if " AF0" in line]
    assert [line.split(" AF")[0] for line in diagnostics] == ["ff.py:7:5:"]
    assert "'N.b'" in diagnostics[0]


def test_check_with_diff_puts_nothing_but_the_patch_on_stdout(tmp_path):
    copy_case("custom_alias", tmp_path / "spectrum.py")

    result = run_migrate("--check", "--diff", "spectrum.py", cwd=tmp_path)

    assert result.returncode == 1
    assert result.stdout.startswith("--- a/spectrum.py\n+++ b/spectrum.py\n@@ ")
    assert all(line[:1] in " +-@\\" for line in result.stdout.splitlines())


def test_unknown_coding_is_an_error_at_line_1_column_1(tmp_path):
    (tmp_path / "badenc.py").write_bytes(
        b"# -*- coding: nosuchcodec -*-\nimport equinox as eqx\n"
    )

    result = run_migrate("badenc.py", cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr.startswith(
        "badenc.py:1:1: error: cannot parse: unknown encoding: nosuchcodec\n"
    )


@pytest.mark.parametrize(
    "spelling", ["data", "data/", "./src/pkg/data", "src/pkg/data/", "ABSOLUTE"]
)
def test_exclude_takes_the_spellings_shells_complete(spelling, tmp_path):
    copy_case("decorated", tmp_path / "src" / "pkg" / "data" / "d.py")
    copy_case("decorated", tmp_path / "src" / "pkg" / "model.py")
    if spelling == "ABSOLUTE":
        spelling = str(tmp_path / "src" / "pkg" / "data")

    result = run_migrate("--check", "--exclude", spelling, ".", cwd=tmp_path)

    assert result.stdout == f"would migrate: {Path('src', 'pkg', 'model.py')}\n"
    assert "1 of 1 file would be migrated." in result.stderr


def test_exclude_relative_to_the_working_directory_outside_the_walked_one(tmp_path):
    copy_case("decorated", tmp_path / "src" / "pkg" / "data" / "d.py")
    copy_case("decorated", tmp_path / "src" / "pkg" / "model.py")

    result = run_migrate(
        "--check", "--exclude", "../src/pkg/data", ".", cwd=tmp_path / "src"
    )

    assert result.stdout == f"would migrate: {Path('pkg', 'model.py')}\n"


def _symlink(link: Path, target: str) -> None:
    try:
        link.symlink_to(target)
    except OSError:  # Windows without the privilege
        pytest.skip("cannot create symbolic links here")


def test_walk_skips_dangling_links_and_hidden_files(tmp_path):
    copy_case("decorated", tmp_path / "model.py")
    # What Emacs leaves next to a file being edited.
    _symlink(tmp_path / ".#model.py", "user@host.12345:1700000000")
    _symlink(tmp_path / "gone.py", "deleted.py")
    copy_case("decorated", tmp_path / ".hidden.py")

    result = run_migrate("--check", ".", cwd=tmp_path)

    assert result.returncode == 1, result.stderr
    assert result.stdout == f"would migrate: {Path('.', 'model.py')}\n"
    assert result.stderr == "1 of 1 file would be migrated.\n"


def test_a_file_reached_twice_is_migrated_and_counted_once(tmp_path):
    copy_case("decorated", tmp_path / "pkg" / "model.py")
    _symlink(tmp_path / "pkg" / "alias.py", "model.py")  # sorts first
    _symlink(tmp_path / "linked", "pkg")

    result = run_migrate("pkg", "./pkg/", "linked", str(tmp_path / "pkg"), cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"migrated: {Path('pkg', 'model.py')}\n"
    assert result.stderr == "1 of 1 file migrated.\n"
    assert (tmp_path / "pkg" / "alias.py").is_symlink()
    assert (tmp_path / "pkg" / "model.py").read_bytes() == expected("decorated")
