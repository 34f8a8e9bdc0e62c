"""Every compile explained: what made a program new where a program of the same
function was compiled before (captured arrays, embedded numbers, another
computation), and the newcomer's path from a slow fit to one trace by
following the hints as printed."""

import inspect
import subprocess
import sys
import textwrap
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jaxtyping import Array, Float, Int

import arrayfield as af
from arrayfield import _jax_private
from arrayfield.diagnostics import _record

needs_sharing = pytest.mark.skipif(
    _jax_private.sharing_problem() is not None, reason="this JAX cannot share compiles"
)

DATA = [np.full((4, 4), float(i), np.float32) for i in range(4)]
GLOBAL_DATA = jnp.ones((4, 4))


def _messages(caught) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, af.RetraceWarning)]


def _line(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _fit_each(jit, datas, steps=2):
    """A fresh jitted step per data set, closing over it (the four galaxies)."""
    for array in datas:
        data = jnp.asarray(array)

        @jit
        def step(x):  # closes over this data set: the point of the test
            return x - 0.1 * jax.grad(lambda x: jnp.sum((x - data) ** 2))(x)  # noqa: B023

        x = jnp.zeros((4, 4))
        for _ in range(steps):
            x = step(x)


@needs_sharing
def test_four_galaxies_closing_over_their_data_are_told_to_pass_it(jaxpr_constants):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.count_compiles() as compiles, af.explain_retraces():
            _fit_each(af.filter_jit, DATA)
    assert compiles.compiled["jit(step)"] == 4
    first, count = _messages(caught)
    assert "was traced and compiled by a new af.filter_jit wrapper" in first
    line = _line(_fit_each, "jnp.sum((x - data) ** 2)")
    assert (
        "captured `data` f32[4,4], a variable step closes over, read by the `sub` "
        f"at tests/test_compiles_explained.py:{line}"
    ) in first
    assert "fix: pass `data` as an argument of step" in first
    assert "compiled again 2 more times for the causes of its warning above" in count


@needs_sharing
def test_passing_the_data_as_an_argument_compiles_once_and_says_nothing():
    @af.filter_jit
    def step(x, data):
        return x - 0.1 * jax.grad(lambda x: jnp.sum((x - data) ** 2))(x)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.count_compiles() as compiles, af.explain_retraces():
            for data in DATA:
                x = jnp.zeros((4, 4))
                for _ in range(2):
                    x = step(x, jnp.asarray(data))
    assert compiles.compiled["jit(step)"] == 1
    assert _messages(caught) == []


@needs_sharing
def test_the_decorator_explains_a_new_wrapper_per_data_set_too(jaxpr_constants):
    def jit(fn):
        return af.explain_retraces(af.filter_jit(fn))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # Data no other test uses: af.filter_jit would run the programs compiled
        # for it before, and a trace that compiles nothing is not told here.
        _fit_each(jit, [d + 10 for d in DATA[:2]])
    (message,) = _messages(caught)
    assert "fix: pass `data` as an argument of step" in message


@needs_sharing
def test_the_environment_switch_explains_it_for_a_whole_script(tmp_path):
    script = tmp_path / "galaxies.py"
    script.write_text(
        textwrap.dedent(
            """
            import arrayfield as af
            import jax.numpy as jnp

            for i in range(3):
                data = jnp.full((3,), float(i))

                @af.filter_jit
                def step(x):
                    return x * data

                step(jnp.ones(3))
            """
        )
    )
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env={"ARRAYFIELD_EXPLAIN_RETRACES": "1", "JAX_PLATFORMS": "cpu"},
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert (
        "captured `data` f32[3], a global of __main__, read by the "
        "`convert_element_type` at galaxies.py:10" in result.stderr
    )
    assert "compiled again 1 more time" in result.stderr


def test_eqx_filter_jit_wrappers_are_told_what_they_capture():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            _fit_each(eqx.filter_jit, DATA[:2])
    (message,) = _messages(caught)
    assert "eqx.filter_jit traces and compiles each new function object anew" in (
        message
    )
    assert "it captures arrays: `data` (f32[4,4])" in message


@needs_sharing
def test_a_global_array_and_a_numpy_array_are_named_as_captured(jaxpr_constants):
    def make(scale):
        local = np.full(4, scale, np.float32)  # NumPy: JAX copies it

        @af.filter_jit
        def step(x):
            return x * local + GLOBAL_DATA[0]

        return step

    def make_global():
        @af.filter_jit
        def shifted(x):
            return x + GLOBAL_DATA

        return shifted

    global GLOBAL_DATA
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            make(1.0)(jnp.ones(4))
            make(2.0)(jnp.ones(4))
            make_global()(jnp.ones((4, 4)))
            saved, GLOBAL_DATA = GLOBAL_DATA, GLOBAL_DATA * 2
            try:
                make_global()(jnp.ones((4, 4)))
            finally:
                GLOBAL_DATA = saved
    local, global_ = _messages(caught)
    assert "captured `local` f32[4], a variable step closes over" in local
    assert (
        f"captured `GLOBAL_DATA` f32[4,4], a global of {__name__}, read by the "
        "`add`" in global_
    )


@needs_sharing
def test_a_new_function_object_with_the_same_program_compiles_and_says_nothing():
    def make():
        @af.filter_jit
        def step(x):
            return x * 2.0

        return step

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.count_compiles() as compiles, af.explain_retraces():
            for _ in range(3):
                make()(jnp.ones(2))
    assert compiles.compiled["jit(step)"] == 1
    assert _messages(caught) == []


@needs_sharing
def test_another_computation_names_the_first_line_that_differs():
    def make(double):
        @af.filter_jit
        def step(x):
            y = jnp.sin(x)
            return y * 2 if double else y + 1

        return step

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            make(True)(jnp.ones(2))
            make(False)(jnp.ones(2))
    (message,) = _messages(caught)
    line = _line(make, "return y * 2 if double")
    assert (
        "its computation differs from there on: from the `add` at "
        f"tests/test_compiles_explained.py:{line}"
    ) in message


class _Helper:  # compared by identity: each new one traces again
    pass


class _Box(eqx.Module):
    origin: int = eqx.field(static=True)
    helper: _Helper = eqx.field(static=True)


@needs_sharing
def test_among_many_causes_the_numbers_that_made_a_new_program_are_named():
    @af.filter_jit
    def render(image, box):
        return image - box.origin

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            for origin in (14, 20, 20):
                render(jnp.ones(3), _Box(origin, _Helper()))
    new_program, same_program = _messages(caught)
    line = _line(render, "image - box.origin")
    assert (
        "it differs only in these numbers; box.origin changed to these values: of "
        "the causes above, only what set them made a new program"
    ) in new_program
    assert (
        "numbers embedded in the program: 14.0 -> 20.0 (the `sub` at "
        f"tests/test_compiles_explained.py:{line})"
    ) in new_program
    # The third call traced for a new helper only, and compiled nothing: its
    # details say what that cost, a trace.
    assert "compiled nothing" in same_program
    assert "every new object traces again" in same_program
    assert "compiles again" not in same_program


def test_decorated_functions_are_compared_within_one_scope():
    # The conftest clears the decorated functions' scope between tests: this is
    # what it clears.
    def make():
        return af.explain_retraces(af.filter_jit(lambda x: x + 1))

    make()(jnp.ones(2))
    assert any(code[0].co_name == "<lambda>" for code in _record.DECORATED.by_code)


# -- the newcomer's Galaxy: following every hint as printed ---------------------------


class Galaxy(af.ArrayModule):  # written the natural way
    flux: float
    position: list
    n_iter: int
    image: Float[Array, "8 8"]
    name: str = "m31"
    smooth: bool = eqx.field(static=True, default=True)


class HintedGalaxy(af.ArrayModule):  # each field as its hint says
    flux: Float[Array, ""]
    position: Float[Array, "2"]
    n_iter: Int[Array, ""]
    image: Float[Array, "8 8"]
    name: str = "m31"
    smooth: bool = eqx.field(static=True, default=True)


def _render(g):
    yy, xx = jnp.mgrid[:8, :8]
    r2 = (yy - g.position[0]) ** 2 + (xx - g.position[1]) ** 2
    return g.flux * jnp.exp(-r2 / 4.0) + g.image


def _newcomer_fit(galaxy, steps):
    """An optax fit under af.filter_jit that bumps a counter with eqx.tree_at:
    its RetraceWarnings and traces."""
    opt = optax.adam(0.05)
    data = jnp.ones((8, 8))
    traces = []

    @af.filter_jit
    def step(g, state):
        traces.append(1)
        params, static = eqx.partition(g, eqx.is_inexact_array)

        def loss(p):
            return jnp.sum((_render(eqx.combine(p, static)) - data) ** 2)

        updates, state = opt.update(jax.grad(loss)(params), state)
        g = eqx.apply_updates(g, updates)
        return eqx.tree_at(lambda g: g.n_iter, g, g.n_iter + 1), state

    state = opt.init(eqx.filter(galaxy, eqx.is_inexact_array))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(steps):
            galaxy, state = step(galaxy, state)
    return _messages(caught), len(traces), galaxy


def test_the_newcomers_fit_warns_and_every_hint_names_the_annotation_to_write():
    start = Galaxy(flux=1.0, position=[4.0, 4.0], n_iter=0, image=jnp.zeros((8, 8)))
    hints = {f.path: f.hint for f in af.audit(start)}
    assert (
        'Galaxy.flux is annotated float: annotate it Float[Array, ""], so it is '
        "stored as an array and traced"
    ) in hints["tree.flux"]
    assert (
        "Galaxy.position is annotated list and holds Python numbers: annotate it "
        'Float[Array, "2"], so they are stored as one array and traced'
    ) in hints["tree.position[0]"]
    assert (
        "Galaxy.n_iter is annotated int: if its value changes between calls (a "
        'step counter, an index into data), annotate it Int[Array, ""]'
    ) in hints["tree.n_iter"]
    assert not any("ArrayModule" in hint for hint in hints.values())
    messages, traces, _ = _newcomer_fit(start, 12)
    (message,) = messages  # within 8 steps, once
    assert traces == 12
    assert (
        "Galaxy.n_iter is annotated int and its value changes between calls: "
        'annotate it Int[Array, ""]'
    ) in message
    assert "static" not in message.split("af.explain_retraces()")[0]


def test_following_every_hint_as_printed_gives_one_trace_and_a_fitted_galaxy():
    start = HintedGalaxy(
        flux=1.0, position=[4.0, 4.0], n_iter=0, image=jnp.zeros((8, 8))
    )
    assert list(af.audit(start)) == []
    messages, traces, end = _newcomer_fit(start, 20)
    assert (messages, traces) == ([], 1)
    assert int(end.n_iter) == 20
    assert float(end.flux) != 1.0  # flux and position are fitted now
    assert not np.allclose(end.position, [4.0, 4.0])


def test_a_number_inside_a_mixed_container_names_the_field_not_arraymodule():
    class Parts(af.ArrayModule):
        parts: list

    (hint,) = [f.hint for f in af.audit(Parts(parts=[1.5, "a"])) if f.value == 1.5]
    assert hint.startswith(
        "test_a_number_inside_a_mixed_container_names_the_field_not_arraymodule."
        "<locals>.Parts.parts is annotated list and holds this Python number"
    )
    assert "ArrayModule" not in hint.split("(declared as")[0]


def test_a_program_another_call_traced_is_not_taken_for_this_ones():
    # Counting is on (a decorated function lives) while an undecorated
    # af.filter_jit call traces between two decorated eqx.filter_jit calls: the
    # second explains its own trace, for which no program is seen.
    def make(data):
        def step(x):
            return x * data

        return af.explain_retraces(eqx.filter_jit(step))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make(jnp.ones(2))(jnp.ones(2))
        af.filter_jit(lambda x: x + 3.0)(jnp.ones(2))
        make(jnp.ones(2) * 2)(jnp.ones(2))
    (message,) = _messages(caught)
    assert "eqx.filter_jit traces and compiles each new function object" in message
