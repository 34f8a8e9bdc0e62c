"""The scripts in examples/ run as a user would run them, and say what they claim."""

from pathlib import Path

from helpers import python

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str) -> str:
    result = python(EXAMPLES / name)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr, result.stderr
    return result.stdout


def test_scene_fit_traces_once_on_array_module_and_reaches_3000():
    out = run_example("scene_fit.py")
    assert "af.ArrayModule :    1 trace  in 3000 steps" in out
    assert "x = 3000" in out
    assert "eqx.Module     :  100 traces in 100 steps" in out


def test_optax_fit_is_clean_fits_and_traces_once():
    out = run_example("optax_fit.py")
    assert "tree is clean" in out
    assert "after 1 trace" in out
    final_loss = float(out.split("final loss ")[1].split()[0])
    assert final_loss < 0.01
