"""Every published benchmark figure is the results file's: the README's and the
docs' tables are rendered from `benchmarks/results/results.json`, the plots were
drawn from it, and no timing is written by hand beside them.

No benchmark runs here: the file a full `benchmarks/run.py` wrote is compared
with what the pages show (`benchmarks/publish.py --check` does the same).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import script_module

ROOT = Path(__file__).resolve().parent.parent
PUBLISH = ROOT / "benchmarks" / "publish.py"

# The pages whose every figure must come from the results file. The others
# (docs/diagnostics.md's per-call overhead) quote their own benchmark scripts.
FIGURE_PAGES = [
    "README.md",
    "docs/index.md",
    "docs/performance.md",
    "docs/many_fields.md",
    "docs/migration.md",
    "docs/ahead_of_time.md",
]
# A timing or a speed-up as prose writes it: "36.3 us", "12 ms", "1.17x", "415x".
FIGURE = re.compile(r"\b\d[\d,]*(\.\d+)?\s?(us|µs|ms|x)\b")


@pytest.fixture(scope="module")
def publish():
    with script_module(PUBLISH, "_arrayfield_publish") as module:
        yield module


def test_every_published_table_and_plot_matches_the_results_file(publish):
    problems = publish.stale()
    assert not problems, "\n".join([*problems, "rerun: python benchmarks/publish.py"])


def test_the_readme_and_the_performance_page_publish_the_tables(publish):
    text = {page: (ROOT / page).read_text() for page in FIGURE_PAGES}
    names = {
        page: {m["name"] for m in publish.BLOCK.finditer(body)}
        for page, body in text.items()
    }
    assert {"seed", "dispatch", "run"} <= names["README.md"]
    assert {"seed", "dispatch", "summary", "run"} <= names["docs/performance.md"]


def test_no_timing_is_written_outside_a_results_block(publish):
    for page in FIGURE_PAGES:
        outside = publish.BLOCK.sub("", (ROOT / page).read_text())
        outside = re.sub(r"```.*?```", "", outside, flags=re.S)  # code is not prose
        found = [m.group(0) for m in FIGURE.finditer(outside)]
        assert not found, f"{page}: figures outside a results block: {found}"


def test_a_changed_figure_is_found(publish, tmp_path):
    # The check itself: one digit changed in the results file makes every page
    # that shows it stale, and the plots too.
    results = json.loads(publish.RESULTS_FILE.read_text())
    row = results["tables"]["seed"]["rows"][2]
    row[-1] = "0.1 us"
    changed = tmp_path / "results.json"
    changed.write_text(json.dumps(results))
    problems = publish.stale(changed)
    assert any("README.md, block 'seed' differs" in p for p in problems)
    assert any("docs/performance.md, block 'seed' differs" in p for p in problems)
    assert any("seed_loop.png was drawn from other results" in p for p in problems)


def test_rewrite_fills_a_marked_block_and_names_an_unknown_table(publish):
    results = json.loads(publish.RESULTS_FILE.read_text())
    page = "before\n<!-- results:seed -->\nold\n<!-- /results -->\nafter\n"
    rewritten = publish.rewrite(page, results)
    assert rewritten.startswith("before\n<!-- results:seed -->\n| base class |")
    assert rewritten.endswith("\n<!-- /results -->\nafter\n")
    assert publish.rewrite(rewritten, results) == rewritten
    with pytest.raises(KeyError, match="no table 'nope' in the results file"):
        publish.rewrite("<!-- results:nope -->\n<!-- /results -->", results)


def test_a_new_case_reaches_a_page_through_the_results_file(publish, tmp_path):
    # What adding a case takes: a @case function filling a Table, one marked block.
    run_py = PUBLISH.parent / "run.py"
    with script_module(run_py, "_arrayfield_bench_run_publish") as run:
        results = run.Results(quick=True)
        results.tables["many_fields"] = run.Table(["fields", "us"], [["100", "1.5"]])
        results.raw["series"] = [0.1, 0.2]
        text = run.dumps(run.to_json(results, seconds=1.0))
    written = json.loads(text)
    assert written["raw"] == {"series": [0.1, 0.2]}
    page = "<!-- results:many_fields -->\n<!-- /results -->\n"
    assert publish.rewrite(page, written) == (
        "<!-- results:many_fields -->\n| fields | us |\n|---|---|\n| 100 | 1.5 |\n"
        "<!-- /results -->\n"
    )


def test_a_block_of_another_run_reads_that_runs_file(publish):
    # `FILE/NAME`: the table NAME of benchmarks/results/FILE.json, the run on the
    # newest JAX beside the main run's; never the main file's table of that name.
    main = json.loads(publish.RESULTS_FILE.read_text())
    other = json.loads(json.dumps(main))
    other["tables"]["seed"]["rows"][2][-1] = "9.9 us"
    page = "<!-- results:newest-jax/seed -->\n<!-- /results -->\n"
    rewritten = publish.rewrite(page, main, others={"newest-jax": other}.__getitem__)
    assert "| 9.9 us |" in rewritten
    assert publish.rewrite(page.replace("newest-jax/", ""), main) != rewritten
    with pytest.raises(
        KeyError, match=r"no results file benchmarks/results/nope\.json"
    ):
        publish.rewrite("<!-- results:nope/seed -->\n<!-- /results -->", main)
