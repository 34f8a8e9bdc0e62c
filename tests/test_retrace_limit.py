"""af.filter_jit warns, unasked and once per function, when it keeps tracing
because arguments that are not arrays take new values (ARRAYFIELD_RETRACE_LIMIT,
7 retraces by default: an 8-field survey's)."""

import warnings

import equinox as eqx
import jax.numpy as jnp
import pytest
from jaxtyping import Array, Float, Int

import arrayfield as af
from arrayfield import _jax_private
from helpers import run_code

LIMIT = 7


class Galaxy(af.ArrayModule):  # written the natural way: numbers as numbers
    flux: float
    n_iter: int
    image: Float[Array, "2"]
    name: str = "m31"


class FixedGalaxy(af.ArrayModule):  # as the warning advises
    flux: Float[Array, ""]
    n_iter: Int[Array, ""]
    image: Float[Array, "2"]
    name: str = "m31"


def _step(galaxy):
    return eqx.tree_at(
        lambda g: (g.flux, g.n_iter), galaxy, (galaxy.flux * 1.01, galaxy.n_iter + 1)
    )


def _fit(galaxy, steps: int) -> tuple[list[str], int]:
    """The RetraceWarnings of `steps` steps under af.filter_jit, and its traces."""
    traces = []

    def step(g):
        traces.append(1)
        return _step(g)

    jitted = af.filter_jit(step)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(steps):
            galaxy = jitted(galaxy)
    messages = [
        str(w.message) for w in caught if issubclass(w.category, af.RetraceWarning)
    ]
    return messages, len(traces)


@pytest.mark.skipif(
    _jax_private.sharing_problem() is not None,
    reason="this JAX cannot share compiles (each value compiles, as said)",
)
def test_under_share_numbers_the_warning_states_the_cost_it_measured():
    # Every new offset is a new trace, but one program serves all but the
    # first: the warning must not say each value is a new XLA compile.
    from helpers import compiles_of

    def shifted(x, offset):
        return x[offset : offset + 2] * 2.0

    step = af.filter_jit(shifted, share_numbers=True)
    x = jnp.arange(16.0)
    with warnings.catch_warnings(record=True) as caught, compiles_of("shifted") as c:
        warnings.simplefilter("always")
        for offset in range(12):
            step(x, offset)
    (message,) = [
        str(w.message) for w in caught if issubclass(w.category, af.RetraceWarning)
    ]
    assert len(c) == 2  # the first offset's own program, and the shared one
    assert "a new XLA compile" not in message
    assert "a family compiles twice, however many values" in message


def test_a_fit_whose_numbers_change_warns_once_naming_each_field_and_its_fix():
    messages, traces = _fit(Galaxy(flux=1.0, n_iter=0, image=jnp.ones(2)), 30)
    assert traces == 30
    (message,) = messages  # once, however many steps follow
    assert f"was traced again {LIMIT} times by af.filter_jit because Python" in (
        message
    )
    assert (
        "Galaxy.flux is annotated float and its value changes between calls: "
        'annotate it Float[Array, ""]'
    ) in message
    assert (
        "Galaxy.n_iter is annotated int and its value changes between calls: "
        'annotate it Int[Array, ""]'
    ) in message
    assert "static" not in message  # a value that changes every step is data
    assert "ARRAYFIELD_RETRACE_LIMIT=0" in message


def test_the_warning_comes_at_the_limit_not_before():
    start = Galaxy(flux=1.0, n_iter=0, image=jnp.ones(2))
    assert _fit(start, LIMIT)[0] == []
    assert len(_fit(start, LIMIT + 1)[0]) == 1


def test_following_the_advice_gives_one_trace_and_no_warning():
    messages, traces = _fit(FixedGalaxy(flux=1.0, n_iter=0, image=jnp.ones(2)), 30)
    assert (messages, traces) == ([], 1)


def test_new_functions_and_objects_do_not_warn():
    # A jitted function of functions traces per function by design (equinox's
    # own filter_jvp does), and af.filter_jit shares the compiles of such traces.
    @af.filter_jit
    def apply(f, x):
        return f(x)

    with warnings.catch_warnings():
        warnings.simplefilter("error", af.RetraceWarning)
        for k in range(3 * LIMIT):
            apply(lambda x, k=k: x + k, jnp.ones(2))


def test_a_few_shapes_and_flags_do_not_warn():
    @af.filter_jit
    def scale(x, mode):
        return x * 2 if mode == "double" else x

    with warnings.catch_warnings():
        warnings.simplefilter("error", af.RetraceWarning)
        for n in range(1, 6):  # five shapes: jax.jit's own retraces, one key
            for mode in ("double", "same"):  # two flags: two keys
                scale(jnp.ones(n), mode)


def test_no_warning_while_explain_retraces_explains_each_retrace():
    @af.filter_jit
    def add(x, k):
        return x + k

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            for k in range(LIMIT + 3):
                add(jnp.ones(2), k)
    texts = [str(w.message) for w in caught]
    assert texts and not any("times by af.filter_jit" in t for t in texts)


@pytest.mark.parametrize(("limit", "warned"), [("0", False), ("3", True)])
def test_the_limit_is_a_setting_and_zero_turns_the_warning_off(limit, warned):
    code = (
        "import warnings, jax.numpy as jnp, arrayfield as af\n"
        "add = af.filter_jit(lambda x, k: x + k)\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    for k in range(5):\n"
        "        add(jnp.ones(2), k)\n"
        "print(sum('times by af.filter_jit' in str(w.message) for w in caught))\n"
    )
    result = run_code(code, env={"ARRAYFIELD_RETRACE_LIMIT": limit})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ("1" if warned else "0")


def test_a_limit_that_is_not_a_count_is_refused_naming_the_variable():
    code = "import arrayfield as af\naf.filter_jit\n"
    result = run_code(code, env={"ARRAYFIELD_RETRACE_LIMIT": "many"})
    assert result.returncode != 0
    assert "ARRAYFIELD_RETRACE_LIMIT='many': expected a whole number" in result.stderr


def test_a_watched_function_elsewhere_does_not_silence_the_warning():
    # A decorated function counts traces for as long as it lives; the warning
    # is quiet only while a block (or the environment switch) watches every call.
    watched = af.explain_retraces(af.filter_jit(lambda x: x))
    messages, _ = _fit(Galaxy(flux=1.0, n_iter=0, image=jnp.ones(2)), LIMIT + 1)
    assert len(messages) == 1
    assert watched(jnp.ones(1)).shape == (1,)


def test_numbers_in_static_fields_count_toward_the_warning():
    # A survey's boxes at per-field origins: the origin is a static slice start,
    # so each field is a new key (in the tree structure, not among the leaves).
    class Box(eqx.Module):
        flux: Float[Array, "2"]
        origin: int = eqx.field(static=True)

    @af.filter_jit
    def render(box, frame):
        return frame.at[box.origin : box.origin + 2].add(box.flux)

    frame = jnp.zeros(32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for field in range(LIMIT + 1):
            render(Box(jnp.ones(2), field), frame)
    (message,) = [
        str(w.message) for w in caught if issubclass(w.category, af.RetraceWarning)
    ]
    assert f"traced again {LIMIT} times" in message
    assert "box.origin" in message and f"{LIMIT - 1} -> {LIMIT}" in message
    # An origin cannot be an array slice start: the advice that works comes first.
    assert "share_numbers=True" in message
    assert "make it an ordinary array field" not in message


def test_static_fields_that_hold_no_numbers_do_not_count():
    class Named(eqx.Module):
        x: Float[Array, "2"]
        name: str = eqx.field(static=True)

    @af.filter_jit
    def scaled(named):
        return named.x * 2

    with warnings.catch_warnings():
        warnings.simplefilter("error", af.RetraceWarning)
        for k in range(2 * LIMIT):
            scaled(Named(jnp.ones(2), f"source {k}"))
