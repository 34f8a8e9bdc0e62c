"""Survey scale (issue 29): `examples/survey.py` on 1 and 2 local Dask workers,
with JAX's persistent compilation cache and without it, and on 2 threads of one
worker (issue 50).

Each configuration runs the example as a user does, in a fresh process with a
fresh results folder (and a fresh cache folder, except the "warm cache" line,
which reuses the cache the line before wrote): the wall time the example reports
(its fields, from the moment its cluster is up), the process's whole wall time
(interpreter, imports and cluster start included), and each worker's compiles
and cache reads, read back from the per-field result files. Configurations are
interleaved round by round; the table shows medians. The load average of the
host is recorded before every run, to say how noisy the machine was.

Writes `benchmarks/results/survey.json` and rewrites the blocks between
`<!-- survey:NAME -->` and `<!-- /survey -->` in docs/survey.md from it
(`--check`: change nothing, exit 1 if the page differs from the file).

Run: JAX_PLATFORMS=cpu python benchmarks/survey.py [--fields 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "survey.py"
RESULTS_FILE = ROOT / "benchmarks" / "results" / "survey.json"
PAGE = ROOT / "docs" / "survey.md"
BLOCK = re.compile(
    r"(?P<open><!-- survey:(?P<name>[\w-]+) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- /survey -->)",
    re.S,
)
# (label, workers, cache): "cold" a new cache folder, "warm" the previous run's.
# A negative worker count is that many threads of one worker in the example's
# own process (`--threads`: Dask's threaded workers).
CONFIGS = [
    ("1 worker, no cache", 1, None),
    ("2 workers, no cache", 2, None),
    ("1 worker, cache (cold)", 1, "cold"),
    ("2 workers, cache (cold)", 2, "cold"),
    ("2 workers, cache (warm: a second survey)", 2, "warm"),
    ("2 threads of 1 worker, no cache", -2, None),
]


def run_once(
    fields: int, steps: int, workers: int, cache: str | None
) -> dict[str, Any]:
    results = Path(tempfile.mkdtemp(prefix="survey-bench-results-"))
    command = [
        sys.executable,
        str(EXAMPLE),
        *("--fields", str(fields), "--steps", str(steps)),
        *(("--workers", str(workers)) if workers > 0 else ("--threads", str(-workers))),
        *("--results", str(results), "--no-progress"),
    ]
    command += ["--no-cache"] if cache is None else ["--cache-dir", cache]
    load = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    process_s = time.perf_counter() - start
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    per_process: dict[int, dict[str, int]] = {}
    for path in sorted(results.glob("field-*.npz")):
        with np.load(path) as saved:
            meta = json.loads(str(saved["meta"]))
        counts = per_process.setdefault(meta["pid"], {"compiles": 0, "reads": 0})
        counts["compiles"] += meta["compiles"]
        counts["reads"] += meta["cache_loads"]
    return {
        **summary,
        "process_s": round(process_s, 2),
        "load_before": load,
        "per_process": sorted(per_process.values(), key=lambda c: -c["compiles"]),
    }


def measure(fields: int, steps: int, rounds: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in CONFIGS}
    for round_ in range(rounds):
        # Alternate the order, so that a neighbour's load does not always hit
        # the same line; the warm line keeps following the cold one it reads.
        order = CONFIGS[:2] if round_ % 2 == 0 else [CONFIGS[5], *CONFIGS[1::-1]]
        order += (
            CONFIGS[2:] if round_ % 2 == 0 else [CONFIGS[3], CONFIGS[4], CONFIGS[2]]
        )
        cache = None
        for label, workers, kind in order:
            if kind == "cold":
                cache = tempfile.mkdtemp(prefix="survey-bench-cache-")
            run = run_once(fields, steps, workers, None if kind is None else cache)
            print(f"round {round_ + 1}, {label}: {json.dumps(run)}", flush=True)
            runs[label].append(run)
    return runs


def table(runs: dict[str, list[dict[str, Any]]], fields: int, steps: int) -> dict:
    one_worker = {
        cache: statistics.median(r["wall_s"] for r in runs[f"1 worker, {cache}"])
        for cache in ("no cache", "cache (cold)")
    }
    rows = []
    for label, _, kind in CONFIGS:
        measured = runs[label]
        wall = statistics.median(r["wall_s"] for r in measured)
        base = one_worker["no cache" if kind is None else "cache (cold)"]
        last = measured[-1]
        compiles = ", ".join(str(p["compiles"]) for p in last["per_process"])
        reads = ", ".join(str(p["reads"]) for p in last["per_process"])
        rows.append(
            [
                label,
                f"{wall:.1f}",
                f"{wall / base:.2f}x" if kind != "warm" else "",
                f"{statistics.median(r['process_s'] for r in measured):.1f}",
                str(last["step_compiles"]),
                compiles,
                reads,
            ]
        )
    return {
        "columns": [
            f"{fields} fields, {steps} steps each",
            "wall, fields (s)",
            "vs 1 worker",
            "wall, whole process (s)",
            "step compiles in the cluster",
            "compiles per worker",
            "cache reads per worker",
        ],
        "rows": rows,
    }


def markdown(results: dict[str, Any]) -> dict[str, str]:
    blocks = {}
    for name, measured in results["tables"].items():
        t = measured["table"]
        lines = [
            "| " + " | ".join(t["columns"]) + " |",
            "|" + "---|" * len(t["columns"]),
        ]
        lines += ["| " + " | ".join(row) + " |" for row in t["rows"]]
        blocks[name] = "\n".join(lines) + "\n"
    m = results["machine"]
    loads = results["load_average"]
    blocks["run"] = (
        f"Measured by `python benchmarks/survey.py` on {results['date']}: "
        f"{results['rounds']} rounds, medians; {m['cores']} cores ({m['cpu']}), "
        f"Python {m['python']}, jax {m['jax']}, dask {m['dask']}, CPU backend. "
        f"The host was shared: its load average before a run was "
        f"{loads['min']:.1f} to {loads['max']:.1f} (median {loads['median']:.1f}) "
        f"on {m['cores']} cores.\n"
    )
    return blocks


def rewrite(text: str, blocks: dict[str, str]) -> str:
    def block(match: re.Match[str]) -> str:
        if match["name"] not in blocks:
            known = ", ".join(blocks)
            raise KeyError(f"{PAGE.name} shows {match['name']!r}; measured: {known}")
        return f"{match['open']}{blocks[match['name']]}{match['close']}"

    return BLOCK.sub(block, text)


def machine() -> dict[str, Any]:
    import dask
    import jax

    cpu = platform.processor() or platform.machine()
    with open("/proc/cpuinfo") as info:
        names = [line.split(":", 1)[1].strip() for line in info if "model name" in line]
    return {
        "cores": os.cpu_count(),
        "cpu": names[0] if names else cpu,
        "python": platform.python_version(),
        "jax": jax.__version__,
        "dask": dask.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fields", type=int, default=16)
    parser.add_argument(
        "--steps",
        type=int,
        nargs="+",
        default=[300, 2000],
        help="steps a field: one table each",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if stale"
    )
    args = parser.parse_args(argv)
    if args.check:
        expected = rewrite(
            PAGE.read_text(), markdown(json.loads(RESULTS_FILE.read_text()))
        )
        if expected != PAGE.read_text():
            print(f"{PAGE} differs from {RESULTS_FILE}", file=sys.stderr)
            return 1
        return 0
    start = time.perf_counter()
    tables, loads = {}, []
    for steps in args.steps:
        runs = measure(args.fields, steps, args.rounds)
        loads += [r["load_before"] for rs in runs.values() for r in rs]
        tables[f"steps-{steps}"] = {
            "table": table(runs, args.fields, steps),
            "runs": runs,
        }
    results = {
        "date": datetime.date.today().isoformat(),
        "seconds": round(time.perf_counter() - start),
        "rounds": args.rounds,
        "machine": machine(),
        "load_average": {
            "min": min(loads),
            "max": max(loads),
            "median": statistics.median(loads),
        },
        "tables": tables,
    }
    RESULTS_FILE.write_text(json.dumps(results, indent=1) + "\n")
    PAGE.write_text(rewrite(PAGE.read_text(), markdown(results)))
    print(f"wrote {RESULTS_FILE.relative_to(ROOT)} and {PAGE.relative_to(ROOT)}")
    for block in markdown(results).values():
        print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
