"""The scripts in examples/ run as a user would run them, and say what they claim."""

from pathlib import Path

from helpers import python

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str) -> str:
    result = python(EXAMPLES / name)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr, result.stderr
    return result.stdout


def test_scene_fit_shows_plain_module_hand_fix_and_array_module_side_by_side():
    out = run_example("scene_fit.py")
    rows = {line[:35].strip(): line[35:].split() for line in out.splitlines()}
    # Exact trace counts: one per step on the plain Module, one on the other two;
    # then the first step (the compile) and each later step, timed apart.
    expected_traces = {
        "eqx.Module, x = 0": ["150", "in", "150"],
        "eqx.Module, jnp.asarray converter": ["1", "in", "3000"],
        "af.ArrayModule, x = 0": ["1", "in", "3000"],
    }
    for name, traces in expected_traces.items():
        assert rows[name][:3] == traces, out
        first, first_unit, later, later_unit = rows[name][3:]
        assert float(first) > 0 and first_unit == "ms"
        assert float(later) > 0 and later_unit in ("ms", "us")
    assert "x faster than eqx.Module (quotient of the medians) and takes" in out
    assert "the hand fix's time" in out


def test_optax_fit_is_clean_fits_and_traces_once():
    out = run_example("optax_fit.py")
    assert "tree is clean" in out
    assert "after 1 trace" in out
    final_loss = float(out.split("final loss ")[1].split()[0])
    assert final_loss < 0.01
