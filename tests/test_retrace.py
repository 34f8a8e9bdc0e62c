import functools
import sys
import textwrap
import threading
import warnings

import equinox as eqx
import jax
import jax.monitoring
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import monitoring as jax_monitoring  # the listener list, to compare
from jaxtyping import Array, Float, Int

import arrayfield as af
from arrayfield import _eqx_private, _jax_private, _tracing
from arrayfield.diagnostics import _repeats, _retrace
from helpers import python

# What af.filter_jit shares, where it shares callables at all (equinox >= 0.13 and
# jax.jit's parts readable); elsewhere the audit's af.filter_jit column equals
# eqx.filter_jit's, which the agreement tests check on every version.
needs_sharing = pytest.mark.skipif(
    _jax_private.sharing_problem() is not None,
    reason="callable sharing needs equinox >= 0.13 and jax.jit's parts readable",
)


def _retraces(record) -> list[warnings.WarningMessage]:
    return [w for w in record if issubclass(w.category, af.RetraceWarning)]


def _messages(record) -> list[str]:
    return [str(w.message) for w in _retraces(record)]


def _this_line() -> int:
    """The caller's line number: where a warning should point."""
    return sys._getframe(1).f_lineno


@pytest.fixture(autouse=True)
def _no_program_compiled_before():
    """What these tests count (compiled again, or a program compiled before)
    depends on what this process compiled: af.filter_jit shares a program
    compiled by any earlier wrapper, also another test's (`x + 1` is common).
    Each test starts with none."""
    jax.clear_caches()


@pytest.fixture
def caught():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        yield record
        _repeats.tell_all_repeats()  # here, not at the exit of the test run


class Plain(eqx.Module):
    x: np.array


class Settings(eqx.Module):
    w: Float[Array, "3"]
    lr: float


class Counter(af.ArrayModule):
    count: Int[Array, ""]
    rate: Float[Array, ""]


def _add_one(tree, x):
    return jax.tree_util.tree_map(lambda s: s + 1, tree)


# -- the hooks --------------------------------------------------------------------


def test_hooks_match_this_jax_and_equinox():
    assert _eqx_private.watch_problem() is None
    _tracing.check_compatible()


def test_jax_reports_trace_events_on_traces_and_never_on_cache_hits():
    # What the hook relies on: a call that traced saw at least one event (older JAX
    # reports two per trace), and a cache hit saw none.
    events = []

    def listener(event, duration, **kwargs):
        if event == _tracing.TRACE_EVENT:
            events.append(event)

    @eqx.filter_jit
    def double(x):
        return 2 * x

    x, y = jnp.ones(3), jnp.ones(4)
    per_call = []
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        for argument in (x, x, y):
            before = len(events)
            double(argument)
            per_call.append(len(events) - before)
    finally:
        _tracing.unregister_duration_listener(listener)
    traced = [count > 0 for count in per_call]
    assert traced == [True, False, True], (
        f"JAX no longer reports {_tracing.TRACE_EVENT!r} on each trace (events per "
        f"call: {per_call}); arrayfield.explain_retraces cannot see retraces with "
        "this JAX version."
    )


def test_jit_traces_are_told_from_eager_transformations():
    # What `_wrap_traced` relies on: JAX's current trace says whether a jit is
    # staging the code, also under a grad inside the jit, and not under eager grad.
    seen = []

    def probe(x):
        seen.append(_tracing.in_jit_trace())
        return jnp.sum(x**2)

    probe(jnp.ones(2))
    jax.grad(probe)(jnp.ones(2))
    jax.jit(probe)(jnp.ones(2))
    jax.jit(jax.grad(probe))(jnp.ones(2))
    assert seen == [False, False, True, True], (
        "arrayfield.explain_retraces cannot tell a jit trace from an eager call with "
        f"this JAX version (in_jit_trace gave {seen})."
    )


# -- one test per cause -----------------------------------------------------------


def test_seed_scalar_in_array_field_of_plain_module_names_path_and_says_subclass(
    caught,
):
    step = af.explain_retraces(eqx.filter_jit(_add_one))
    scene = Plain(x=0)
    for _ in range(3):
        scene = step(scene, 1)
    assert scene.x == 3
    # Three traces: the first is the baseline, the third has the second's cause.
    (message,) = _messages(caught)
    assert "_add_one (tests/test_retrace.py:" in message
    assert "  tree.x: 0 -> 1\n" in message
    assert "hashes its value into the cache key" in message
    assert "Plain.x is annotated np.array" in message
    assert "subclass af.ArrayModule" in message
    _repeats.tell_all_repeats()
    assert "compiled again 1 more time for the causes" in _messages(caught)[1]


def test_a_changing_float_field_is_advised_an_array_annotation_never_static(caught):
    step = af.explain_retraces(eqx.filter_jit(_add_one))
    step(Settings(w=jnp.ones(3), lr=0.1), 1)
    step(Settings(w=jnp.ones(3), lr=0.2), 1)
    (message,) = _messages(caught)
    assert "tree.lr: 0.1 -> 0.2" in message
    assert (
        "Settings.lr is annotated float and its value changes between calls: "
        'annotate it Float[Array, ""], and subclass af.ArrayModule instead of '
        "eqx.Module, so it is stored as an array and traced"
    ) in message
    assert "static" not in message  # a value that changes every call is data


def test_scalar_argument_suggests_an_array(caught):
    step = af.explain_retraces(eqx.filter_jit(_add_one))
    step(jnp.ones(2), 1)
    step(jnp.ones(2), 2)
    (message,) = _messages(caught)
    assert "  x: 1 -> 2\n" in message
    assert "jnp.asarray(x, dtype=...)" in message


def test_weak_to_strong_flip(caught):
    step = af.explain_retraces(eqx.filter_jit(_add_one))
    step(jnp.asarray(1.0), None)
    step(jnp.asarray(1.0, dtype=jnp.float32), None)
    (message,) = _messages(caught)
    assert "tree: weak f32[] -> f32[]" in message
    assert "weak/strong type flip" in message
    assert "jnp.asarray(x, dtype=jnp.float32)" in message


def test_shape_change_in_a_nested_scene(caught):
    class Morph(eqx.Module):
        size: Float[Array, " n"]

    class Source(eqx.Module):
        morph: Morph

    class Scene(eqx.Module):
        sources: list

    step = af.explain_retraces(eqx.filter_jit(_add_one))
    step(Scene([Source(Morph(jnp.ones(2))), Source(Morph(jnp.ones(2)))]), None)
    step(Scene([Source(Morph(jnp.ones(2))), Source(Morph(jnp.ones(3)))]), None)
    (message,) = _messages(caught)
    assert "tree.sources[1].morph.size: f32[2] -> f32[3]" in message
    assert "shape changed" in message
    assert "sources[0]" not in message


def test_dtype_change(caught):
    step = af.explain_retraces(eqx.filter_jit(_add_one))
    step(jnp.ones(2, dtype=jnp.float32), None)
    step(jnp.ones(2, dtype=jnp.int32), None)
    (message,) = _messages(caught)
    assert "tree: f32[2] -> i32[2]" in message and "dtype changed" in message


def test_structure_change_names_the_field_that_appeared(caught):
    class Maybe(eqx.Module):
        a: Array
        b: Array | None

    step = af.explain_retraces(eqx.filter_jit(_add_one))
    step(Maybe(jnp.ones(2), None), None)
    step(Maybe(jnp.ones(2), jnp.ones(2)), None)
    step(Maybe(jnp.ones(2), None), None)  # cached: no warning
    (message,) = _messages(caught)
    assert "tree.b: (absent) -> f32[2]" in message
    assert "pytree structure changed: this leaf appeared" in message


def test_structure_change_names_the_key_that_disappeared(caught):
    step = af.explain_retraces(eqx.filter_jit(_add_one))
    step({"a": jnp.ones(2), "b": jnp.ones(2)}, None)
    step({"a": jnp.ones(2)}, None)
    (message,) = _messages(caught)
    assert 'tree["b"]: f32[2] -> (absent)' in message
    assert "disappeared" in message


def test_fresh_partial_per_call_is_a_different_callable(caught):
    @af.explain_retraces
    @eqx.filter_jit
    def apply(x, fn):
        return fn(x)

    for scale in (2.0, 2.0):
        apply(jnp.ones(2), functools.partial(jnp.multiply, scale))
    (message,) = _messages(caught)
    assert "  fn: functools.partial(" in message
    assert ") (a new object)\n" in message  # the two reprs are the same
    assert "different callable object" in message
    assert "create the closure or partial once, outside the loop" in message


def test_keyword_arguments_are_written_as_kwargs_keys(caught):
    @af.explain_retraces
    @eqx.filter_jit
    def update(params, **kwargs):
        return params

    update(jnp.ones(2), lr=0.1)
    update(jnp.ones(2), lr=0.2)
    (message,) = _messages(caught)
    assert 'kwargs["lr"]: 0.1 -> 0.2' in message


def test_python_number_replaced_by_an_array_says_an_int(caught):
    step = af.explain_retraces(eqx.filter_jit(lambda tree, x: tree))
    step(jnp.ones(2), 1)
    step(jnp.ones(2), jnp.ones(2))
    (message,) = _messages(caught)
    assert "  x: 1 -> f32[2]\n" in message
    assert "was an int (hashed into the cache key), is an array now" in message


def test_string_value_change_is_explained(caught):
    step = af.explain_retraces(eqx.filter_jit(_add_one))
    step(jnp.ones(2), "source-1")
    step(jnp.ones(2), "source-2")
    (message,) = _messages(caught)
    assert "x: 'source-1' -> 'source-2'" in message
    assert "a str is not an array, so filter_jit hashes it" in message


def test_static_field_change_is_explained(caught):
    class Config(eqx.Module):
        w: Array
        mode: str = eqx.field(static=True)

    step = af.explain_retraces(eqx.filter_jit(_add_one))
    step(Config(jnp.ones(2), "fast"), None)
    step(Config(jnp.ones(2), "slow"), None)
    (message,) = _messages(caught)
    assert "tree.mode: 'fast' -> 'slow'" in message
    assert "a static=True field is part of the cache key" in message


def test_silent_reuse_of_an_int_trace_for_a_float_is_flagged(caught):
    step = af.explain_retraces(eqx.filter_jit(lambda x, k: x * k))
    first = step(jnp.ones(2, dtype=jnp.int32), 1)
    reused = step(jnp.ones(2, dtype=jnp.int32), 1.0)
    step(jnp.ones(2, dtype=jnp.int32), 1.0)  # the same reuse is reported once
    assert first.dtype == reused.dtype == jnp.int32  # the hazard itself
    assert [w.category for w in caught] == [af.TraceReuseWarning]
    message = str(caught[0].message)
    assert "reused a trace compiled for arguments of other types" in message
    assert "  k: traced with int 1, called with float 1.0" in message
    assert "hash alike" in message


def test_cache_hit_on_a_float_trace_is_not_reported_as_reuse_of_an_int_trace(caught):
    # Trace 1: (f32[3], 1). Trace 2: (f32[4], 1.0), a retrace for the shape. Calling
    # (f32[4], 1.0) again hits trace 2, made for a float: nothing is reused with the
    # wrong type, though trace 1 has the same structure and an equal hashed value.
    step = af.explain_retraces(eqx.filter_jit(lambda x, k: x * k))
    step(jnp.ones(3), 1)
    step(jnp.ones(4), 1.0)
    caught.clear()
    step(jnp.ones(4), 1.0)
    step(jnp.ones(4, dtype=jnp.int32), 1.0)  # a new trace for the dtype: no reuse
    assert [w.category for w in caught] == [af.RetraceWarning]
    caught.clear()
    step(jnp.ones(3), 1.0)  # this one does reuse trace 1, made for an int
    assert [w.category for w in caught] == [af.TraceReuseWarning]


def test_no_reuse_check_for_a_function_that_only_takes_arrays(caught):
    step = af.explain_retraces(eqx.filter_jit(_add_one))
    site_checks = []
    for _ in range(3):
        step(jnp.ones(2), jnp.ones(()))
        site_checks.append(caught == [])
    assert site_checks == [True, True, True]


def test_jax_jit_shape_change_and_static_argument_change(caught):
    def scale(x, k):
        return x * k

    step = af.explain_retraces(jax.jit(scale, static_argnums=1))
    step(jnp.ones(2), 2)
    step(jnp.ones(3), 2)
    step(jnp.ones(3), 3)
    first, second = _messages(caught)
    assert "x: f32[2] -> f32[3]" in first
    assert "k: 2 -> 3" in second and "static_argnums" in second


def test_static_argument_of_jax_jit_around_a_plain_function_names_jax_jit(caught):
    jitted = jax.jit(af.explain_retraces(lambda x, n: x * n), static_argnames="n")
    jitted(jnp.ones(2), n=2)
    jitted(jnp.ones(2), n=3)
    (message,) = _messages(caught)
    assert "  n: 2 -> 3\n" in message
    assert "a static argument of jax.jit (static_argnums/static_argnames)" in message
    assert "filter_jit" not in message


def test_plain_function_wrapped_then_jitted(caught):
    traces = []

    def body(x):
        traces.append(x.shape)
        return x + 1

    step = eqx.filter_jit(af.explain_retraces(body))
    step(jnp.ones(2))
    step(jnp.ones(2))
    step(jnp.ones(5))
    assert traces == [(2,), (5,)]
    (message,) = _messages(caught)
    assert "x: f32[2] -> f32[5]" in message
    eager = af.explain_retraces(body)(np.ones(2))  # an eager call is not a trace
    assert eager.tolist() == [2.0, 2.0] and len(_messages(caught)) == 1


def test_plain_function_called_twice_in_one_jit_trace_is_not_a_retrace(caught):
    loss = af.explain_retraces(lambda x: jnp.sum(x**2))

    @jax.jit
    def outer(x):
        both = jax.lax.cond(x[0] > 0, loss, lambda y: loss(y[:1]), x)
        return loss(x) + loss(x[:2]) + both  # one trace, one compile of `outer`

    outer(jnp.ones(3))
    assert _messages(caught) == []
    outer(jnp.ones(4))  # `outer` traces again, and so does `loss`: once
    (message,) = _messages(caught)
    assert "x: f32[3] -> f32[4]" in message


def test_plain_function_under_eager_grad_is_not_a_trace(caught):
    loss = af.explain_retraces(lambda x: jnp.sum(x**2))
    for shape in (3, 3, 4):
        jax.grad(loss)(jnp.ones(shape))
        jnp.zeros(shape + 5)  # an unrelated jit trace in between
    assert _messages(caught) == []


def test_retrace_of_plain_function_under_jit_points_at_the_callers_line(caught):
    jitted = eqx.filter_jit(af.explain_retraces(lambda x, n: x * n))
    jitted(jnp.ones(2), 1)
    line = _this_line() + 1
    jitted(jnp.ones(2), 2)
    (warned,) = _retraces(caught)
    assert (warned.filename, warned.lineno) == (__file__, line)  # not equinox's
    assert "eqx.filter_jit hashes its value" in str(warned.message)


def test_clean_array_module_loop_traces_once_and_warns_never():
    traces = []

    @af.explain_retraces
    @eqx.filter_jit
    def step(c: Counter, x):
        traces.append(None)
        return Counter(count=c.count + 1, rate=c.rate * 0.5 + x)

    c = Counter(count=0, rate=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", af.RetraceWarning)
        for _ in range(100):
            c = step(c, jnp.asarray(0.0))
        with af.explain_retraces():
            for _ in range(100):
                c = step(c, jnp.asarray(0.0))
    assert len(traces) == 1
    assert int(c.count) == 200


# -- the context manager ----------------------------------------------------------


def _global_state():
    return (
        _eqx_private.jit_wrapper_classes()[0].__dict__["__call__"],
        list(jax_monitoring.get_event_duration_listeners()),
        _eqx_private.call_hook_installed(),
        _retrace._thread.session,
        _retrace._thread.depth,
    )


def test_context_manager_covers_filter_jit_functions_defined_outside(caught):
    @eqx.filter_jit  # defined before the block, and not edited
    def step(tree, x):
        return _add_one(tree, x)

    with af.explain_retraces():
        scene = Plain(x=0)
        for _ in range(3):
            scene = step(scene, 1)
    messages = _messages(caught)
    assert len(messages) == 2
    assert "tree.x: 0 -> 1" in messages[0] and "subclass af.ArrayModule" in messages[0]
    step(Plain(x=7), 1)  # outside the block: not watched
    assert len(_messages(caught)) == 2


class _Model(eqx.Module):
    w: Float[Array, ""]

    @eqx.filter_jit
    def apply(self, x):
        return self.w * x


def test_retrace_of_filter_jit_method_in_a_block_points_at_the_callers_line(caught):
    with af.explain_retraces():
        _Model(1).apply(jnp.ones(2))
        line = _this_line() + 1
        _Model(2).apply(jnp.ones(2))
    (warned,) = _retraces(caught)
    assert "self.w: 1 -> 2" in str(warned.message)
    assert (warned.filename, warned.lineno) == (__file__, line)  # not equinox's


def test_decorated_function_called_in_a_block_warns_once_per_retrace(caught):
    step = af.explain_retraces(eqx.filter_jit(lambda x, k: x * k))
    step(jnp.ones(3), 1)  # before the block: the decorator's record has it
    with af.explain_retraces():
        step(jnp.ones(3), 2)
        step(jnp.ones(3), 3)
    messages = _messages(caught)
    assert len(messages) == 2, messages
    assert "k: 1 -> 2" in messages[0]
    assert (
        "again 1 more time for the causes of its warning above (k)" in (messages[1])
    )  # told as the block ends
    assert all(w.filename == __file__ for w in _retraces(caught))


def test_wrapped_plain_function_jitted_in_a_block_warns_once_per_retrace(caught):
    jitted = eqx.filter_jit(af.explain_retraces(lambda x, n: x * n))
    with af.explain_retraces():
        jitted(jnp.ones(2), 1)
        jitted(jnp.ones(2), 2)
    (message,) = _messages(caught)
    assert "  n: 1 -> 2\n" in message


def test_context_manager_sees_a_fresh_jitted_partial_as_the_cause(caught):
    def scaled(k, x):
        return k * x

    with af.explain_retraces():
        for k in (1.0, 2.0):
            eqx.filter_jit(functools.partial(scaled, k))(jnp.ones(2))
    (message,) = _messages(caught)
    assert "<function>: functools.partial(" in message
    assert "different callable object" in message


def test_context_manager_leaves_no_global_state_behind():
    before = _global_state()
    with af.explain_retraces():
        assert _eqx_private.call_hook_installed()
        eqx.filter_jit(_add_one)(jnp.ones(2), None)
    assert _global_state() == before


def test_context_manager_leaves_no_global_state_behind_when_the_block_raises():
    before = _global_state()
    with pytest.raises(ZeroDivisionError), af.explain_retraces():
        eqx.filter_jit(_add_one)(jnp.ones(2), None)
        1 / 0  # noqa: B018
    assert _global_state() == before


def test_nested_blocks_share_one_record_and_unhook_at_the_outermost_exit(caught):
    before = _global_state()
    step = eqx.filter_jit(lambda tree, x: tree)
    outer = af.explain_retraces()
    with outer:
        step(Plain(x=0), 1)
        with outer:  # re-entering the same object is fine too
            step(Plain(x=1), 1)  # compared with the outer block's first call
        assert _eqx_private.call_hook_installed()
    assert _global_state() == before
    (message,) = _messages(caught)
    assert "tree.x: 0 -> 1" in message


def test_threads_see_only_their_own_block(caught):
    barrier = threading.Barrier(3)
    errors = []

    def watched(offset: int):
        try:
            step = eqx.filter_jit(lambda t, y: t)
            with af.explain_retraces():
                barrier.wait()
                for i in range(4):
                    step(Plain(x=offset + i), None)
        except BaseException as error:  # surfaced below
            errors.append(error)

    def unwatched():
        try:
            step = eqx.filter_jit(lambda t, z: t)
            barrier.wait()
            for i in range(4):
                step(Plain(x=100 + i), None)
        except BaseException as error:
            errors.append(error)

    before = _global_state()
    threads = [
        threading.Thread(target=watched, args=(0,)),
        threading.Thread(target=watched, args=(10,)),
        threading.Thread(target=unwatched),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    messages = _messages(caught)
    # Each watched thread: 4 traces, 3 retraces of one cause, told in full once
    # and counted at the end of its block. The unwatched thread: none.
    assert len(messages) == 4
    assert sum("t.x: 0 -> 1" in m for m in messages) == 1
    assert sum("t.x: 10 -> 11" in m for m in messages) == 1
    assert sum("again 2 more times" in m for m in messages) == 2
    assert not any("10" + "0 ->" in m for m in messages)
    assert _global_state() == before


def test_trace_counters_are_per_thread():
    @eqx.filter_jit
    def f(x):
        return x

    _tracing.acquire_trace_counter()
    try:
        x = jnp.ones(7)
        before = _tracing.counter.traces
        seen = []
        thread = threading.Thread(
            target=lambda: (f(x), seen.append(_tracing.counter.traces))
        )
        thread.start()
        thread.join()
        assert seen == [1]
        assert _tracing.counter.traces == before
    finally:
        _tracing.release_trace_counter()


def test_environment_variable_watches_an_unedited_script(tmp_path):
    script = tmp_path / "seed.py"
    script.write_text(
        textwrap.dedent(
            """
            import arrayfield
            import equinox as eqx
            import jax
            import numpy as np

            @eqx.filter_jit
            def _step(scene, x):
                return jax.tree_util.tree_map(lambda s: s + 1, scene)

            class MyModule(eqx.Module):
                x: np.array

            scene = MyModule(x=0)
            for _ in range(3):
                scene = _step(scene, 1)
            print(scene.x)
            """
        )
    )
    result = python(script, env={_retrace.ENV_VAR: "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "3"
    assert result.stderr.count("RetraceWarning: _step (") == 2
    assert "scene.x: 0 -> 1" in result.stderr
    assert "subclass af.ArrayModule" in result.stderr
    quiet = python(script, env={_retrace.ENV_VAR: "0"})
    assert "RetraceWarning" not in quiet.stderr


# -- the summary: one line per cause ------------------------------------------------


class _Wcs:  # compared by identity
    def __repr__(self):
        return "Wcs()"


class _Source(eqx.Module):
    flux: float
    render: object


class _Scene(eqx.Module):
    sources: list
    wcs: object


def _scene(flux):
    sources = []
    for i in range(3):  # a loop, not a comprehension: one qualname on every Python
        sources.append(_Source(flux + i, lambda x: x))
    return _Scene(sources, _Wcs())


def _line_of(cls, text):
    import inspect

    lines, start = inspect.getsourcelines(cls)
    return start + next(i for i, line in enumerate(lines) if text in line)


@needs_sharing
def test_a_retrace_on_a_scene_starts_with_one_line_per_cause(caught):
    step = af.explain_retraces(eqx.filter_jit(lambda scene: 0))
    step(_scene(1.0))
    step(_scene(2.0))
    (message,) = _messages(caught)
    lines = message.splitlines()
    flux, render = _line_of(_Source, "flux: float"), _line_of(_Source, "render:")
    wcs = _line_of(_Scene, "wcs: object")
    assert lines[0].endswith(
        "was traced and compiled again. Compared with the closest earlier call, "
        "3 causes:"
    )
    assert lines[1] == (
        f"  scene.sources[*].flux (_Source.flux at test_retrace.py:{flux}): 3 leaves, "
        "e.g. 1.0 -> 2.0; fix: _Source.flux is annotated float and its value "
        'changes between calls: annotate it Float[Array, ""], and subclass '
        "af.ArrayModule instead of eqx.Module, so it is stored as an array and "
        "traced"
    )
    assert lines[2] == (
        f"  scene.sources[*].render (_Source.render at test_retrace.py:{render}): "
        "3 leaves, e.g. <function _scene.<locals>.<lambda>> -> <function "
        "_scene.<locals>.<lambda>> (a new object); fix: create the closure or "
        "partial once, outside the loop (a jax.jit wrapper: jit the function once "
        "at module level), or pass what differs as an argument (an array), or hold "
        "it in an eqx.Module or eqx.Partial, whose arrays are traced; "
        "af.filter_jit traces again too, but compiles again only where the new "
        "trace is a different program"
    )
    assert lines[3] == (
        f"  scene.wcs (_Scene.wcs at test_retrace.py:{wcs}): Wcs() -> Wcs() (a new "
        "object); fix: give _Wcs value equality (__eq__ and __hash__ over what it "
        "holds), or keep it out of the jitted arguments (close over one object, or "
        "pass the arrays the step needs from it)"
    )
    assert lines[4] == "Details:"
    # Each cause's why and fix once; the other leaves of a cause point at the first.
    assert message.count("why: ") == 3
    assert "  scene.sources[2].flux: 3.0 -> 4.0 (as scene.sources[0].flux)" in lines


def test_details_list_a_few_leaves_per_cause_then_count_the_rest(caught):
    step = af.explain_retraces(eqx.filter_jit(lambda xs: 0))
    step([float(i) for i in range(20)])
    step([float(i) + 0.5 for i in range(20)])
    (message,) = _messages(caught)
    assert "  xs[*]: 20 leaves, e.g. 0.0 -> 0.5; fix: " in message
    assert "  xs[2]: 2.0 -> 2.5 (as xs[0])" in message
    assert "xs[3]: " not in message
    assert "  ... and 17 more, as xs[0]" in message


def test_every_fix_names_the_declaring_class_field_and_line(caught):
    class Box(eqx.Module):
        origin: jnp.ndarray
        name: str

    step = af.explain_retraces(eqx.filter_jit(lambda box: 0))
    step(Box(jnp.ones(2), "a"))
    step(Box(jnp.ones(3), "b"))
    (message,) = _messages(caught)
    fixes = [line for line in message.splitlines() if line.startswith("    fix: ")]
    origin, name = _line_of(Box, "origin:"), _line_of(Box, "name: str")
    assert fixes == [
        "    fix: pad or bucket inputs to a few fixed shapes (declared as "
        f"test_every_fix_names_the_declaring_class_field_and_line.<locals>.Box.origin, "
        f"test_retrace.py:{origin}).",
        "    fix: a string is part of the cache key by value, in a static=True "
        "field too: keep strings that differ per instance or per call (ids, names) "
        "out of the jitted arguments, e.g. in a dict beside the Module (declared as "
        f"test_every_fix_names_the_declaring_class_field_and_line.<locals>.Box.name, "
        f"test_retrace.py:{name}).",
    ]


@needs_sharing
def test_under_af_filter_jit_a_retrace_that_shares_a_program_says_so(caught):
    step = af.explain_retraces(af.filter_jit(lambda scene: scene.wcs))
    step(_scene(1.0))
    step(_scene(1.0))  # new lambdas and helpers: traced again, the same program
    (message,) = _messages(caught)
    assert "was traced again, but compiled nothing" in message
    assert "scene.sources[*].render (" in message  # still why it traced
    off = af.explain_retraces(af.filter_jit(lambda scene: 0, share_compiles=False))
    caught.clear()
    off(_scene(1.0))
    off(_scene(1.0))
    (message,) = _messages(caught)
    assert "was traced and compiled again" in message


SCALE = 2.0  # a module global that the next test rebinds
OFFSET = 1.0  # read too, never rebound


def _scaled_closure():
    def step(x):
        return x * SCALE + OFFSET

    return step


def test_a_retrace_with_nothing_rebound_keeps_the_causes_outside_the_arguments(
    caught,
):
    x = jnp.ones(3)
    with af.explain_retraces():
        step = eqx.filter_jit(_scaled_closure())
        step(x)
        jax.clear_caches()
        step(x)  # the same arguments and globals: traced again all the same
    (message,) = _messages(caught)
    assert "the cause is outside the arguments" in message
    assert "jax.clear_caches()" in message
    assert "holds a new value" not in message


# -- retraces with the causes of the last warning: counted, told in one line -----------


class _Optimizer(eqx.Module):
    w: Float[Array, "3"]
    lr: float
    decay: float


def test_retraces_with_the_same_causes_are_counted_and_told_at_the_next_warning(
    caught,
):
    step = af.explain_retraces(eqx.filter_jit(lambda state: state.w * state.lr))
    for i in range(20):  # two Python floats that change every step
        step(_Optimizer(jnp.ones(3), 0.1 / (i + 1), 0.9 / (i + 1)))
    (first,) = _messages(caught)
    assert "2 causes:" in first and "state.lr: 0.1 -> 0.05" in first
    step(_Optimizer(jnp.ones(4), 1.0, 1.0))  # a new shape: other causes
    first, count, shape = _messages(caught)
    assert count.endswith(
        "was traced and compiled again 18 more times for the causes of its warning "
        "above (state.lr, state.decay): the same fix applies."
    )
    assert "\n" not in count
    assert "state.w: f32[3] -> f32[4]" in shape
    step(_Optimizer(jnp.ones(4), 2.0, 2.0))  # the causes before the last: in full
    assert "state.lr: 1.0 -> 2.0" in _messages(caught)[-1]


def test_a_block_tells_its_count_when_it_ends(caught):
    step = eqx.filter_jit(lambda state: state.w * state.lr)
    with af.explain_retraces():
        for i in range(5):
            step(_Optimizer(jnp.ones(3), float(i), 0.5))
        assert len(_messages(caught)) == 1
    assert (
        "again 3 more times for the causes of its warning above (state.lr)"
        in (_messages(caught)[-1])
    )


def test_the_environment_variable_tells_a_loops_repeats_in_one_line_at_exit(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(
        textwrap.dedent(
            """
            import arrayfield
            import equinox as eqx
            import jax.numpy as jnp
            from jaxtyping import Array, Float

            class Norm(eqx.Module):
                w: Float[Array, "3"]
                eps: Float[Array, ""]
                scale: float

            @eqx.filter_jit
            def step(norm):
                return norm.w * norm.eps * norm.scale

            for i in range(50):
                step(Norm(jnp.ones(3), 1e-5 * (i + 1), 0.5 * (i + 1)))
            """
        )
    )
    result = python(script, env={_retrace.ENV_VAR: "1"})
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("RetraceWarning: step (") == 2
    assert result.stderr.count("Details:") == 1
    assert (
        "was traced and compiled again 48 more times for the causes of its warning "
        "above (norm.eps, norm.scale): the same fix applies." in result.stderr
    )


@needs_sharing
def test_retraces_that_compiled_nothing_are_counted_as_such(caught):
    step = af.explain_retraces(af.filter_jit(lambda scene: scene.wcs))
    for _ in range(4):
        step(_scene(1.0))  # new lambdas and helpers each time: the same program
    (message,) = _messages(caught)
    assert "was traced again, but compiled nothing" in message
    _repeats.tell_all_repeats()
    assert (
        " was traced again 2 more times for the causes of its warning above"
        in (_messages(caught)[-1])
    )


def test_a_count_told_as_an_error_at_the_end_of_a_block_leaves_no_hook(caught):
    step = eqx.filter_jit(lambda state: state.w * state.lr)
    before = _global_state()
    raises = pytest.raises(af.RetraceWarning, match="again 1 more time")
    with raises, af.explain_retraces():
        for i in range(3):
            step(_Optimizer(jnp.ones(3), float(i), 0.5))
        warnings.simplefilter("error", af.RetraceWarning)
    assert _global_state() == before


_WARM_CACHE = textwrap.dedent(
    """
    import sys, warnings
    import equinox as eqx, jax, jax.numpy as jnp
    import arrayfield as af
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        step = af.explain_retraces(eqx.filter_jit(lambda x, k: x * k))
        step(jnp.ones(2), 2.0)
        step(jnp.ones(2), 3.0)  # a retrace, and a new program
    print("compiled nothing" in str(caught[-1].message))
    """
)


def test_a_program_read_from_the_persistent_cache_is_not_called_a_compile(tmp_path):
    cache = str(tmp_path / "cache")
    runs = [python("-c", _WARM_CACHE, cache, check=True) for _ in range(2)]
    said = [run.stdout.split()[-1] for run in runs]
    assert said == ["False", "True"]  # compiled, then read from disk


def test_a_field_of_an_installed_package_gets_the_fix_its_user_can_make():
    # eqx.nn.Dropout.p is annotated float in equinox: the user cannot change the
    # annotation, but can set an array where they set it.
    traces = []

    @eqx.filter_jit
    def apply(dropout, x, key):
        traces.append(1)
        return dropout(x, key=key)

    dropout = eqx.nn.Dropout(p=0.1, inference=False)
    x, key = jnp.ones(4), jax.random.key(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            for p in (0.1, 0.2):
                apply(eqx.tree_at(lambda d: d.p, dropout, p), x, key)
    (text,) = [str(w.message) for w in caught if w.category is af.RetraceWarning]
    assert (
        "fix: Dropout.p is declared in the installed package equinox, so from your "
        "own code: where its value changes between calls, give it an array" in text
    )
    assert "In equinox itself: Dropout.p is annotated float" in text
    # The first fix, as printed, from the user's side: one trace for every value.
    traces.clear()
    for p in (0.1, 0.2, 0.3):
        apply(eqx.tree_at(lambda d: d.p, dropout, jnp.asarray(p)), x, key)
    assert len(traces) == 1


def test_a_field_of_the_users_own_class_keeps_the_annotation_fix():
    class Dropout(eqx.Module):  # this file's: the user's own code
        p: float

    @eqx.filter_jit
    def apply(dropout, x):
        return x * dropout.p

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            for p in (0.1, 0.2):
                apply(Dropout(p), jnp.ones(2))
    (text,) = [str(w.message) for w in caught if w.category is af.RetraceWarning]
    assert "installed package" not in text
    assert 'annotate it Float[Array, ""]' in text


def test_a_list_that_grows_is_advised_padding_not_a_none_switch():
    class Source(eqx.Module):
        flux: jax.Array

    class Scene(eqx.Module):
        sources: list

    @eqx.filter_jit
    def total(scene):
        return sum(s.flux for s in scene.sources)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            for n in (3, 4):
                total(Scene([Source(jnp.ones(2)) for _ in range(n)]))
    (text,) = [str(w.message) for w in caught if w.category is af.RetraceWarning]
    assert "scene.sources has another length" in text
    assert "Pad it to a few common lengths" in text
    assert "switching between None" not in text


class _Scale(eqx.Module):
    w: jax.Array

    def __call__(self, x):
        return self.w * x


def test_a_jitted_module_with_arrays_is_explained_not_hashed(caught):
    # A Module holding arrays cannot be hashed: naming the function it jits
    # must not try to (a cache keyed on the callable once did, and raised).
    step = af.explain_retraces(eqx.filter_jit(_Scale(jnp.ones(()))))
    step(jnp.ones(2))
    step(jnp.ones(3))
    (message,) = _messages(caught)
    assert message.startswith("_Scale was traced and compiled again.")
    assert "x: f32[2] -> f32[3]" in message
