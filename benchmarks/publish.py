"""Publish `benchmarks/results/results.json`: the README's and the docs' tables
and plots are drawn from it, and from nothing else.

A page marks where a table goes with a pair of comments:

    <!-- results:NAME -->
    (rewritten by this script)
    <!-- /results -->

`NAME` is a table of the results file (`summary`, `seed`, `dispatch`, ...) or
`run`, a sentence saying where and when the run ran. `FILE/NAME` reads another
run's file, `benchmarks/results/FILE.json`: `newest-jax/seed` is the seed table
of the run on the newest JAX, which needs a newer Python than the main run's
(`run.py --results benchmarks/results/newest-jax.json`). Each figure still
comes from one file, named beside it by its run sentence. The plots
(`docs/assets/seed_loop.png`, `dispatch.png`, `many_fields.png`) carry the
results file's SHA-256 in their PNG metadata, so a stale plot is found without
redrawing it.

Run: `python benchmarks/publish.py` (a full `benchmarks/run.py` runs it), or
`python benchmarks/publish.py --check`, which changes nothing and exits 1 when a
page or a plot differs from the results file. Needs no JAX; drawing needs
matplotlib (the `bench` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import re
import struct
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"
RESULTS_FILE = RESULTS_DIR / "results.json"
ASSETS = ROOT / "docs" / "assets"
BLOCK = re.compile(
    r"(?P<open><!-- results:(?P<name>(?:[\w-]+/)?[\w-]+) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- /results -->)",
    re.S,
)
_SOURCE_KEY = "Source"  # the PNG text chunk that names the results file's digest


def pages() -> list[Path]:
    """Every published page: the README and the documentation site's pages."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def load(path: Path = RESULTS_FILE) -> dict[str, Any]:
    return json.loads(path.read_text())


def other_run(stem: str) -> dict[str, Any]:
    """The results file `benchmarks/results/STEM.json`, for blocks `STEM/NAME`."""
    path = RESULTS_DIR / f"{stem}.json"
    if not path.exists():
        raise KeyError(f"no results file {path.relative_to(ROOT)}")
    return load(path)


def digest(path: Path = RESULTS_FILE) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- text ----------------------------------------------------------------------


def run_sentence(results: dict[str, Any]) -> str:
    m = results["machine"]
    return (
        f"Measured by `python benchmarks/run.py` ({results['mode']} run of "
        f"{results['date']}, {results['seconds']} s) on {m['cores']} cores "
        f"({m['cpu']}), Python {m['python']}, jax {m['jax']}, equinox "
        f"{m['equinox']}, {m['backend']} backend."
    )


def table_markdown(table: dict[str, Any]) -> str:
    lines = [
        "| " + " | ".join(table["columns"]) + " |",
        "|" + "---|" * len(table["columns"]),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in table["rows"]]
    if table.get("caption"):
        lines += ["", table["caption"]]
    return "\n".join(lines)


def render(name: str, results: dict[str, Any]) -> str:
    """The text of the block `name`, ending in a newline."""
    if name == "run":
        return run_sentence(results) + "\n"
    if name not in results["tables"]:
        known = ", ".join(["run", *results["tables"]])
        raise KeyError(f"no table {name!r} in the results file (it has: {known})")
    return table_markdown(results["tables"][name]) + "\n"


def rewrite(
    text: str,
    results: dict[str, Any],
    others: Callable[[str], dict[str, Any]] = other_run,
) -> str:
    """`text` with every marked block rendered afresh from `results` (a block
    `FILE/NAME` from `others(FILE)`)."""

    def block(match: re.Match[str]) -> str:
        return (
            f"{match['open']}{expected(match['name'], results, others)}{match['close']}"
        )

    return BLOCK.sub(block, text)


def expected(
    name: str, results: dict[str, Any], others: Callable[[str], dict[str, Any]]
) -> str:
    stem, _, table = name.rpartition("/")
    return render(table, others(stem) if stem else results)


def published_names() -> set[str]:
    return {m["name"] for page in pages() for m in BLOCK.finditer(page.read_text())}


# -- plots ---------------------------------------------------------------------


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_seed_loop(results: dict[str, Any], plt: Any) -> Any:
    runs = results["raw"]["seed_loop"]
    fig, ax = plt.subplots(figsize=(8, 5))
    for (name, run), style in zip(runs.items(), ("-", "--", ":"), strict=True):
        seconds = run["cumulative_s"]
        label = run["label"].replace("`", "")
        if name == "int":
            label += f" (recompiles every step; first {len(seconds)} steps)"
        ax.plot(range(1, len(seconds) + 1), seconds, style, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("cumulative wall time [s] (log scale)")
    ax.set_title("Seed loop: scene = step(scene, 1) under eqx.filter_jit")
    ax.legend(fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    return fig


def plot_dispatch(results: dict[str, Any], plt: Any) -> Any:
    """Per-step time of each jit relative to `jax.jit`, one group per loop."""
    cases = [f for f in results["raw"]["dispatch"] if "jax" in f["us"]]
    jits = [("af", "af.filter_jit"), ("eqx", "eqx.filter_jit"), ("jax", "jax.jit")]
    width = 0.27
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for j, (name, label) in enumerate(jits):
        xs = [i + (j - 1) * width for i in range(len(cases))]
        ratios = [f["us"][name] / f["us"]["jax"] for f in cases]
        bars = ax.bar(xs, ratios, width, label=label)
        us = [f["us"][name] for f in cases]
        labels = [f"{t:.1f} us" if t < 100 else f"{t:.0f} us" for t in us]
        ax.bar_label(bars, labels=labels, fontsize="x-small")
    ax.axhline(1.0, color="black", linewidth=0.8)
    names = [
        f"{f['case']}\n({f['leaves']} {'leaf' if f['leaves'] == 1 else 'leaves'})"
        for f in cases
    ]
    ax.set_xticks(range(len(cases)), names)
    ax.tick_params(axis="x", labelsize="small")
    ax.set_ylabel("time per step / jax.jit's")
    ax.set_title("Per-step dispatch, warm (labels: median us per step)")
    ax.legend(fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def plot_many_fields(results: dict[str, Any], plt: Any) -> Any:
    """Per-field time of each jit, compile (mean per field) and steps stacked."""
    measured = results["raw"]["many_fields"]
    k, steps = measured[0]["fields"], measured[0]["steps"]
    names = [m["jit"] for m in measured]
    compile_s = [m["compile_s"] / k for m in measured]
    steps_s = [m["step_ms"] * m["steps"] / 1e3 for m in measured]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(names, compile_s, label="compile (mean per field)")
    ax.bar(names, steps_s, bottom=compile_s, label=f"{steps} steps")
    for i, m in enumerate(measured):
        label = f"{m['traces']} compile{'s' if m['traces'] != 1 else ''}"
        top = compile_s[i] + steps_s[i]
        ax.annotate(label, (i, top), ha="center", va="bottom", fontsize="small")
    ax.set_ylabel("seconds per field")
    ax.set_title(f"Many fields: {k} fields fitted one after another")
    ax.legend(fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)
    return fig


PLOTS: dict[str, Callable[[dict[str, Any], Any], Any]] = {
    "seed_loop": plot_seed_loop,
    "dispatch": plot_dispatch,
    "many_fields": plot_many_fields,
}


def png_text(path: Path) -> dict[str, str]:
    """The tEXt chunks of a PNG file (where matplotlib writes its metadata)."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG file")
    found, offset = {}, 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        chunk = data[offset + 8 : offset + 8 + length]
        if kind == b"tEXt":
            key, _, value = chunk.partition(b"\0")
            found[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, rest = chunk.partition(b"\0")
            found[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        offset += 12 + length
    return found


def source_tag(sha: str) -> str:
    return f"benchmarks/results/results.json sha256:{sha}"


def draw(results: dict[str, Any], sha: str) -> list[Path]:
    try:
        plt = _pyplot()
    except ImportError:
        print("matplotlib is not installed (the `bench` extra): plots not drawn")
        return []
    written = []
    for name, plot in PLOTS.items():
        fig = plot(results, plt)
        fig.tight_layout()
        path = ASSETS / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120, metadata={_SOURCE_KEY: source_tag(sha)})
        plt.close(fig)
        written.append(path)
    return written


# -- check ---------------------------------------------------------------------


def stale(path: Path = RESULTS_FILE) -> list[str]:
    """Every published figure that differs from the results file, as a sentence."""
    results, sha = load(path), digest(path)
    others = functools.cache(other_run)  # each other run's file read once
    problems = []
    for page in pages():
        text = page.read_text()
        for match in BLOCK.finditer(text):
            where = f"{page.relative_to(ROOT)}, block {match['name']!r}"
            try:
                body = expected(match["name"], results, others)
            except KeyError as error:
                problems.append(f"{where}: {error.args[0]}")
                continue
            if match["body"] != body:
                problems.append(f"{where} differs from the results file")
    # Every table of every run is published: the main run's, and each other
    # run's that a page reads (a missing file is reported at its block above).
    published = published_names()
    runs = {"": results}
    for name in published:
        stem = name.rpartition("/")[0]
        if stem:
            with contextlib.suppress(KeyError):
                runs[stem] = others(stem)
    for stem, run in runs.items():
        for table in run["tables"]:
            name = f"{stem}/{table}" if stem else table
            if name not in published:
                problems.append(f"table {name!r} is published on no page")
    for name in PLOTS:
        plot = ASSETS / f"{name}.png"
        if not plot.exists():
            problems.append(f"{plot.relative_to(ROOT)} is missing")
        elif png_text(plot).get(_SOURCE_KEY) != source_tag(sha):
            problems.append(f"{plot.relative_to(ROOT)} was drawn from other results")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS_FILE)
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if stale"
    )
    args = parser.parse_args(argv)
    if args.check:
        problems = stale(args.results)
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    results = load(args.results)
    others = functools.cache(other_run)
    for page in pages():
        text = page.read_text()
        updated = rewrite(text, results, others)
        if updated != text:
            page.write_text(updated)
            print(f"rewrote {page.relative_to(ROOT)}")
    for path in draw(results, digest(args.results)):
        print(f"drew {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
