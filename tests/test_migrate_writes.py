"""What `arrayfield migrate` writes, and what its previews promise (issue 21).

`--diff` is the patch of exactly what the same command writes without it
(`--diff --fix`: what `--fix` writes), and plain `git apply` and `patch -p1`
accept it from the directory the command ran in, nested paths included.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from arrayfield.__main__ import main
from arrayfield.migrate import _cli
from helpers import run_cli

TREE = {
    # A class to migrate: the plain run writes it.
    "src/pkg/base.py": """\
        import equinox as eqx
        import jax


        class Base(eqx.Module):
            weight: jax.Array
        """,
    # Already migrated; only --fix edits it (AF002 on a field used as a shape).
    "src/pkg/deep/shapes.py": """\
        import jax
        import jax.numpy as jnp

        import arrayfield as af


        class Grid(af.ArrayModule):
            shape: jax.Array

            def zeros(self):
                return jnp.zeros(self.shape)
        """,
}


def write_tree(root: Path) -> None:
    for name, text in TREE.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*.py"))
    }


def patch_of(root: Path, *flags: str) -> bytes:
    """`migrate --diff FLAGS src` run in `root`, as bytes (nothing written):
    not through helpers, which capture text, as a patch is in each file's own
    encoding."""
    before = snapshot(root)
    result = subprocess.run(
        [sys.executable, "-m", "arrayfield", "migrate", "--diff", *flags, "src"],
        capture_output=True,
        cwd=root,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert snapshot(root) == before
    return result.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("flags", [(), ("--fix",)], ids=["plain", "fix"])
def test_diff_applied_with_git_apply_equals_what_the_command_writes(tmp_path, flags):
    previewed, written = tmp_path / "previewed", tmp_path / "written"
    for root in (previewed, written):
        write_tree(root)
    patch = patch_of(previewed, *flags)
    (tmp_path / "m.patch").write_bytes(patch)

    applied = subprocess.run(
        ["git", "apply", "../m.patch"], capture_output=True, cwd=previewed
    )
    assert applied.returncode == 0, applied.stderr
    assert run_cli("migrate", *flags, "src", cwd=written).returncode == 0

    assert snapshot(previewed) == snapshot(written)
    original = tmp_path / "original"
    write_tree(original)
    assert snapshot(written) != snapshot(original)
    headers = [line for line in patch.splitlines() if line.startswith(b"+++ ")]
    if flags:
        assert headers == [b"+++ b/src/pkg/base.py", b"+++ b/src/pkg/deep/shapes.py"]
    else:
        assert headers == [b"+++ b/src/pkg/base.py"]


@pytest.mark.skipif(shutil.which("patch") is None, reason="needs patch")
def test_diff_applies_with_patch_p1(tmp_path):
    previewed, written = tmp_path / "previewed", tmp_path / "written"
    for root in (previewed, written):
        write_tree(root)
    patch = patch_of(previewed, "--fix")

    applied = subprocess.run(
        ["patch", "-p1", "--batch"], input=patch, capture_output=True, cwd=previewed
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert run_cli("migrate", "--fix", "src", cwd=written).returncode == 0
    assert snapshot(previewed) == snapshot(written)


# A Module class and a large string: big files that parse fast.
BIG_BEFORE = (
    "import equinox as eqx\nimport jax\n\n\nclass M(eqx.Module):\n"
    "    x: jax.Array\n\n\nDATA = '''\n" + "0123456789abcdef" * 2**16 + "\n'''\n"
)
BIG_AFTER = BIG_BEFORE.replace(
    "import equinox as eqx\n", "import arrayfield as af\n"
).replace("(eqx.Module)", "(af.ArrayModule)")


def big_tree(root: Path, count: int) -> list[Path]:
    paths = []
    for index in range(count):
        path = root / f"pkg{index % 4}" / f"m{index}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(BIG_BEFORE)
        path.chmod(0o640)
        paths.append(path)
    return paths


def start_fix(root: Path, *flags: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "arrayfield", "migrate", "--fix", "-q"),
            *(*flags, "."),
        ],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def test_a_reader_never_sees_a_half_written_file_during_fix(tmp_path):
    paths = big_tree(tmp_path, 60)
    before, after = BIG_BEFORE.encode(), BIG_AFTER.encode()
    run = start_fix(tmp_path)
    while run.poll() is None:
        for path in paths:
            data = path.read_bytes()
            assert data in (before, after), f"{path.name}: {len(data)} bytes"
    assert run.returncode == 0, run.stderr.read() if run.stderr else ""
    assert all(path.read_bytes() == after for path in paths)
    # Mode kept, and nothing left beside the files.
    assert {path.stat().st_mode & 0o777 for path in paths} == {0o640}
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == sorted(
        path.name for path in paths
    )


def test_an_interrupted_fix_leaves_every_file_old_or_new(tmp_path):
    paths = big_tree(tmp_path, 60)
    before, after = BIG_BEFORE.encode(), BIG_AFTER.encode()
    run = start_fix(tmp_path)
    while run.poll() is None and not any(p.read_bytes() == after for p in paths):
        pass
    run.send_signal(signal.SIGINT)  # Ctrl-C, in the middle of the writes
    run.wait(timeout=60)
    # 0 only when the run ended before the signal came.
    assert run.returncode in (0, 130), run.stderr.read() if run.stderr else ""

    contents = [path.read_bytes() for path in paths]
    assert all(data in (before, after) for data in contents)
    assert after in contents
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file() and p not in paths]
    assert leftovers == []
    # A second run finishes the job.
    assert run_cli("migrate", "-q", ".", cwd=tmp_path).returncode == 0
    assert all(path.read_bytes() == after for path in paths)


def test_a_preview_without_fix_says_how_many_diagnostics_fix_edits(tmp_path):
    write_tree(tmp_path)
    (tmp_path / "src/pkg/base.py").unlink()  # only the --fix edit is left

    preview = run_cli("migrate", "--check", "src", cwd=tmp_path)
    assert preview.returncode == 0
    assert "would migrate" not in preview.stdout
    assert preview.stderr == (
        "0 of 1 file would be migrated, 1 diagnostic, 1 of them edited by --fix.\n"
    )
    fixed = run_cli("migrate", "--check", "--fix", "src", cwd=tmp_path)
    assert fixed.returncode == 1
    assert fixed.stderr == "1 of 1 file would be migrated.\n"


# Issue 30: what a run must not overwrite, and what it must not leave behind.


def test_a_file_edited_while_fix_runs_is_left_as_edited(tmp_path, monkeypatch, capsys):
    paths = big_tree(tmp_path, 6)
    before, after = BIG_BEFORE.encode(), BIG_AFTER.encode()
    edit = b"# saved by the user while migrate ran\n" + before
    edited = paths[-1]
    write = _cli.write_atomically

    def user_saves_a_file_then_write(path, *args, **kwargs):
        # Every file was read before the first write: the user saves the last
        # one while migrate writes the others.
        if edited.read_bytes() == before:
            edited.write_bytes(edit)
        return write(path, *args, **kwargs)

    monkeypatch.setattr(_cli, "write_atomically", user_saves_a_file_then_write)
    monkeypatch.chdir(tmp_path)
    status = main(["migrate", "--fix", "-q", "."])
    stderr = capsys.readouterr().err

    assert status == 2, stderr
    assert edited.read_bytes() == edit
    name = edited.relative_to(tmp_path).as_posix()
    assert (
        f"{name}:1:1: error: changed since migrate read it; not written "
        "(run it again)\n"
    ) in stderr
    assert all(path.read_bytes() == after for path in paths if path != edited)
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and p not in paths]


def test_a_read_only_file_is_not_rewritten(tmp_path):
    write_tree(tmp_path)
    base = tmp_path / "src/pkg/base.py"
    original = base.read_bytes()
    base.chmod(0o444)
    try:
        # A preview still shows what the rewrite would be.
        assert run_cli("migrate", "--check", "src", cwd=tmp_path).returncode == 1
        done = run_cli("migrate", "src", cwd=tmp_path)
        assert done.returncode == 2
        assert done.stderr.splitlines()[0] == (
            "src/pkg/base.py:1:1: error: cannot write: Permission denied "
            "(the file is read-only)"
        )
        assert base.read_bytes() == original
        assert base.stat().st_mode & 0o777 == 0o444
        assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [
            "base.py",
            "shapes.py",
        ]
    finally:
        base.chmod(0o644)


def test_sigterm_during_the_writes_leaves_no_temporary_file(tmp_path):
    paths = big_tree(tmp_path, 60)
    before, after = BIG_BEFORE.encode(), BIG_AFTER.encode()
    directories = sorted({path.parent for path in paths})
    run = start_fix(tmp_path)
    caught = False
    while run.poll() is None and not caught:
        if any(
            entry.name.endswith(".tmp")
            for directory in directories
            for entry in os.scandir(directory)
        ):
            # Stopped while a temporary file exists: the signal arrives
            # before its rename.
            run.send_signal(signal.SIGSTOP)
            caught = any(True for d in directories for _ in d.glob(".*.tmp"))
            if caught:
                run.send_signal(signal.SIGTERM)
            run.send_signal(signal.SIGCONT)
    run.wait(timeout=60)
    assert caught, "the run ended before a write was seen"
    stderr = run.stderr.read().decode() if run.stderr else ""

    assert run.returncode == 143, stderr
    assert "interrupted (SIGTERM)" in stderr
    assert [p for p in tmp_path.rglob("*") if p.is_file() and p not in paths] == []
    assert all(path.read_bytes() in (before, after) for path in paths)
