"""`arrayfield migrate --check` against `ruff check` on the same 300-file tree,
and `migrate --check` and `--diff` on one large generated file.

The tree is what issue 11 measured: 300 files of about 380 lines, one in ten of
them with equinox Module classes (a project base class and subclasses), the
rest plain Python. Both tools run as fresh processes, interleaved round by
round, with the side that goes first alternating; the table gives medians and
the median of the per-round ratios (wall and CPU). Target: migrate within 5x of
ruff. `--check` reads the 31 Module files from the `ast` trees the index parsed
(`arrayfield.migrate._read`); arrayfield runs
byte-compiled, as an installed copy does.

The large file (issue 30) is a generated module of 25,000 Module classes, 5.3 MB:
each command runs as a fresh process, interleaved with `ruff check` round by
round; the table gives median wall times and the largest resident size seen.

    python benchmarks/migrate_tree.py [--files 300] [--rounds 7] [--classes 25000]

Timings are reported, never asserted. The script checks that migrate finds
every Module class file (exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
RUFF = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))

_PLAIN_UNIT = '''

def helper_{i}(values, scale=2.0):
    """Scale and sum values: plain Python."""
    total = 0.0
    for value in values:
        if value > {i}:
            total += value * scale
        else:
            total -= value / scale
    return total


class Record{i}:
    def __init__(self, name, size):
        self.name = name
        self.size = size

    def describe(self):
        return f"{{self.name}} has size {{self.size}}"

    def grow(self, by):
        self.size += by
        return self.size
'''

_MODULE_UNIT = """

class Part{i}(Base):
    flux: float
    scale: float
    weights: jax.Array
    shape: tuple

    def __call__(self, x):
        y = jnp.zeros(self.shape) + x
        for _ in range({i} % 3 + 1):
            y = y * self.scale
        return self.flux * (y * self.weights).sum()


def build_{i}(flux):
    return Part{i}(flux=flux, scale=1.5, weights=jnp.ones(3), shape=(3,))
"""


def build_tree(root: Path, n_files: int) -> int:
    """Write the tree; returns how many files hold Module classes."""
    package = root / "proj"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""A project."""\n')
    (package / "base.py").write_text(
        "import equinox as eqx\n\n\nclass Base(eqx.Module):\n    pass\n"
    )
    module_files = 1
    for number in range(n_files - 2):
        if number % 10 == 0:
            header = (
                '"""Model parts."""\n\nimport jax\nimport jax.numpy as jnp\n\n'
                "from .base import Base\n"
            )
            units = [_MODULE_UNIT.format(i=number * 100 + k) for k in range(21)]
            module_files += 1
        else:
            header = '"""Helpers."""\n\nimport math\n'
            units = [_PLAIN_UNIT.format(i=number * 100 + k) for k in range(16)]
        (package / f"mod_{number:03d}.py").write_text(header + "".join(units))
    return module_files


def generated_module(count: int) -> str:
    """A generated module like a real one: many Module classes with fields."""
    head = "import equinox as eqx\nimport jax\nfrom jaxtyping import Array, Float\n"
    unit = textwrap.dedent(
        '''\


        class Layer{n}(eqx.Module):
            """Layer {n}."""

            weight: jax.Array
            bias: Float[Array, "n"]
            scale: float = 1.0

            def __call__(self, x):
                return self.weight @ x + self.bias * self.scale
        '''
    )
    return head + "".join(unit.format(n=n) for n in range(count))


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak resident size (MB) of one command."""
    start = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 1):  # 1: the file would be migrated
        raise RuntimeError(f"{command} exited {process.returncode}")
    return wall, usage.ru_maxrss / 1024  # kB on Linux


# The large-file commands: (label, arguments after `arrayfield migrate`).
LARGE_COMMANDS = (
    ("migrate --check", ["--check"]),
    ("migrate --diff", ["--diff"]),
    ("migrate --diff --fix --typed", ["--diff", "--fix", "--typed"]),
)


def measure_large(classes: int = 25_000, rounds: int = 3) -> dict[str, Any]:
    """`migrate --check` and `--diff` on one generated file, with `ruff check`
    on the same file each round for scale."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    migrate = [sys.executable, "-m", "arrayfield", "migrate", "-q"]
    commands = [
        (label, [*migrate, *args, "layers.py"]) for label, args in LARGE_COMMANDS
    ]
    commands.append(("ruff check", [RUFF, "check", "--no-cache", "--exit-zero", "-q"]))
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        text = generated_module(classes)
        (root / "layers.py").write_text(text)
        _run(commands[0][1], root, env)  # untimed: writes the byte-code caches
        walls: dict[str, list[float]] = {label: [] for label, _ in commands}
        peaks: dict[str, float] = dict.fromkeys(walls, 0.0)
        for round_number in range(rounds):
            order = commands if round_number % 2 == 0 else commands[::-1]
            for label, command in order:
                wall, peak = _run(command, root, env)
                walls[label].append(wall)
                peaks[label] = max(peaks[label], peak)
    return {
        "classes": classes,
        "megabytes": len(text.encode()) / 1e6,
        "lines": text.count("\n"),
        "rounds": rounds,
        "seconds": {
            label: statistics.median(values) for label, values in walls.items()
        },
        "spread": {label: [min(v), max(v)] for label, v in walls.items()},
        "peak_mb": peaks,
    }


def _time(
    command: list[str], cwd: Path, env: dict[str, str]
) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system, all processes) and stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def measure(files: int = 300, rounds: int = 7) -> dict[str, Any]:
    """Both tools on one tree, interleaved; medians and per-round ratios.

    Raises RuntimeError if migrate's report is not the exact one the tree calls
    for (a benchmark of the wrong output would be meaningless)."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    # Byte-compiled, as an installed arrayfield runs (pip compiles the wheel):
    # with PYTHONDONTWRITEBYTECODE set, every run would time the compiler too.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    migrate = [sys.executable, "-m", "arrayfield", "migrate", "--check", "-q", "proj"]
    ruff = [RUFF, "check", "--no-cache", "--quiet", "--exit-zero", "proj"]
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        expected = build_tree(root, files)
        lines = sum(len(p.read_text().splitlines()) for p in root.rglob("*.py"))
        _time(migrate, root, env)  # untimed: writes the byte-code caches

        samples: dict[str, list[float]] = {
            key: [] for key in ("migrate", "ruff", "migrate cpu", "ruff cpu")
        }
        ratios: dict[str, list[float]] = {"wall": [], "cpu": []}
        stdout = ""
        for round_number in range(rounds):
            pair = [("migrate", migrate), ("ruff", ruff)]
            if round_number % 2:
                pair.reverse()
            for name, command in pair:
                wall, cpu, out = _time(command, root, env)
                samples[name].append(wall)
                samples[f"{name} cpu"].append(cpu)
                if name == "migrate":
                    stdout = out
            ratios["wall"].append(samples["migrate"][-1] / samples["ruff"][-1])
            ratios["cpu"].append(samples["migrate cpu"][-1] / samples["ruff cpu"][-1])

    found = sum(1 for line in stdout.splitlines() if line.startswith("would migrate"))
    reported = sum(1 for line in stdout.splitlines() if " AF001 " in line)
    # Every Module file has 21 classes with one float field reported each
    # (`flux`, `scale`), so the counts are exact.
    if found != 1 or reported != 2 * 21 * (expected - 1):
        raise RuntimeError(f"unexpected migrate output: {found} files, {reported}")
    median = statistics.median
    return {
        "files": files,
        "lines": lines,
        "module_files": expected,
        "reported": reported,
        "seconds": {key: median(values) for key, values in samples.items()},
        "ratio": {kind: median(values) for kind, values in ratios.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--classes", type=int, default=25_000)
    args = parser.parse_args()
    try:
        found = measure(args.files, args.rounds)
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 1
    seconds = found["seconds"]
    print(
        f"tree: {found['files']} files, {found['lines']} lines,"
        f" {found['module_files']} with Module classes"
    )
    print(f"migrate --check: 1 file to migrate (base.py), {found['reported']} AF001")
    print(f"{'':<20}{'wall s':>8}{'CPU s':>8}")
    for label, key in (("arrayfield migrate", "migrate"), ("ruff check", "ruff")):
        print(f"{label:<20}{seconds[key]:>8.3f}{seconds[key + ' cpu']:>8.3f}")
    for kind, ratio in found["ratio"].items():
        verdict = "pass" if ratio <= 5 else "MISS"
        print(
            f"ratio, {kind} (median of rounds): {ratio:.1f}x, target <= 5x: {verdict}"
        )
    large = measure_large(args.classes, max(1, args.rounds // 2))
    print(f"\none file: {large['classes']} classes, {large['megabytes']:.1f} MB")
    for label, seconds in large["seconds"].items():
        print(f"{label:<32}{seconds:>8.2f} s{large['peak_mb'][label]:>8.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
