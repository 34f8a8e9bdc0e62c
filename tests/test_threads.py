"""af.filter_jit and explain_retraces called from many threads at once, as a
survey on Dask's threaded scheduler or a ThreadPoolExecutor calls them: no hang,
no error, the values `eqx.filter_jit` gives, no more compiles than one thread's,
and a diagnostics block that changes only its own thread.

Races are made likely with a short switch interval; a hang fails the test by its
timeout (the cycle runs in a subprocess, so a deadlock cannot stall the suite).
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import arrayfield as af
from arrayfield import _jax_private
from helpers import compiles_of, run_code

THREADS = 8
# Seconds a thread may take before it counts as hung: the busiest test here
# (clear_caches beside six threads making new keys) takes about 60 s alone on
# 2 cores, and more beside another test worker.
TIMEOUT = 300
# Where compiles are not shared (JAX before 0.5) every trace compiles, and that
# JAX's own clear_caches beside compiles on other threads can crash the process.
needs_sharing = pytest.mark.skipif(
    _jax_private.sharing_problem() is not None, reason="this JAX cannot share compiles"
)


@contextlib.contextmanager
def short_switch_interval():
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def run_threads(work, n=THREADS):
    """Run `work(i)` in `n` threads; every exception and every hang fails."""
    errors: list[BaseException] = []

    def target(i):
        try:
            work(i)
        except BaseException as error:  # reported below, with its thread's traceback
            errors.append(error)

    threads = [
        threading.Thread(target=target, args=(i,), daemon=True) for i in range(n)
    ]
    with short_switch_interval():
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(TIMEOUT)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    if errors:
        raise errors[0]


CYCLE = """
import threading, time
import equinox as eqx
import jax.numpy as jnp
import arrayfield as af

a_tracing, b_in_g = threading.Event(), threading.Event()

@af.filter_jit
def helper(x, k):
    return x + k

@eqx.filter_jit
def outer(x):
    b_in_g.set()
    time.sleep(0.5)  # thread A calls outer now, and waits for this trace
    return helper(x, 7)  # a new static key, met inside outer's trace

@af.filter_jit
def step(x):
    a_tracing.set()
    b_in_g.wait()  # thread B is tracing outer
    return outer(x) * 2

out = {}
def a():
    out["a"] = step(jnp.ones(3))
def b():
    a_tracing.wait()
    out["b"] = outer(jnp.ones(3))

threads = [threading.Thread(target=a), threading.Thread(target=b)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(float(out["a"][0]), float(out["b"][0]))
"""


def test_a_cycle_of_traces_across_threads_and_jits_finishes():
    # A traces an af.filter_jit step that calls an eqx.filter_jit function while B
    # traces that function, which calls an af.filter_jit helper with a new key:
    # JAX makes A wait for B's trace, so B must not wait for anything A holds.
    done = run_code(CYCLE, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["16.0", "8.0"]


def _named(name):
    captured = jnp.arange(4.0)  # an array the step closes over: a constant

    def body(x, k, m, label, fail):
        if fail:
            raise ValueError(f"refused {label}")
        return x * k + m + captured[: x.shape[0]], label

    body.__name__ = body.__qualname__ = name
    return body


@needs_sharing
def test_threads_give_eqx_filter_jits_values_and_compile_each_program_once():
    steps = {
        "t_shared": af.filter_jit(_named("t_shared")),
        "t_numbers": af.filter_jit(_named("t_numbers"), share_numbers=True),
        "t_own": af.filter_jit(_named("t_own"), share_compiles=False),
    }
    reference = eqx.filter_jit(_named("t_eqx"))
    # The size follows `k`: each key (k, m, label) meets one shape, so what one
    # thread compiles does not depend on the order of its calls.
    numbers, offsets = [1, 2, 3], [0.5, 1.5]
    calls = list(itertools.product(numbers, offsets, ["a", "b"]))

    def work(i):
        rng = np.random.default_rng(i)
        for j in rng.permutation(len(calls)):
            k, m, label = calls[j]
            x = jnp.full(k + 1, float(i))
            label = f"{label}{i}"  # a static string per thread: a trace each
            if (i + int(j)) % 7 == 0:  # a trace that raises, between the others
                for step in [*steps.values(), reference]:
                    with pytest.raises(ValueError, match=f"refused {label}"):
                        step(x, k, m, label, True)
                continue
            want, _ = reference(x, k, m, label, False)
            for step in steps.values():
                out, got = step(x, k, m, label, False)
                assert got == label
                assert out.dtype == want.dtype
                np.testing.assert_array_equal(np.asarray(out), np.asarray(want))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # new numbers per call: RetraceWarnings
        with contextlib.ExitStack() as stack:
            seen = {
                name: stack.enter_context(compiles_of(name))
                for name in [*steps, "t_eqx"]
            }
            run_threads(work)
    count = {name: len(compiles) for name, compiles in seen.items()}
    eqx_compiles = count["t_eqx"]
    assert eqx_compiles > 0
    # As one thread would: a shared step compiles each program once however
    # many threads traced it (one per shape and offset), the numbers step twice
    # per shape (its first offset's own program, then the one shared by the
    # others), and without sharing a step compiles per trace as eqx does.
    assert count["t_shared"] == len(numbers) * len(offsets)
    assert count["t_numbers"] == 2 * len(numbers)
    assert count["t_own"] <= eqx_compiles


def _donating(name):
    def body(state, grad, k):
        return jax.tree_util.tree_map(lambda s, g: s - k * g, state, grad)

    body.__name__ = body.__qualname__ = name
    return body


@pytest.mark.parametrize("numbers", [False, True], ids=["compiles", "numbers"])
def test_threads_donating_distinct_buffers_match_eqx(numbers):
    # Each thread donates its own fresh buffers: values, and which inputs are
    # consumed, as eqx.filter_jit gives them.
    step = af.filter_jit(_donating("t_donate"), donate="all", share_numbers=numbers)
    reference = eqx.filter_jit(_donating("t_donate_eqx"), donate="all")

    def work(i):
        for j in range(12):
            size, k = 2 + (i + j) % 3, [0.5, 1.5, 2.5][j % 3]
            mine = (jnp.full(size, float(i)), jnp.full(size, float(j)))
            theirs = (jnp.full(size, float(i)), jnp.full(size, float(j)))
            got = step(mine, (jnp.ones(size), jnp.ones(size)), k)
            want = reference(theirs, (jnp.ones(size), jnp.ones(size)), k)
            for a, b in zip(got, want, strict=True):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
            consumed = [x.is_deleted() for x in mine]
            assert consumed == [x.is_deleted() for x in theirs], consumed

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # new numbers per call: RetraceWarnings
        run_threads(work)


@needs_sharing
def test_clear_caches_beside_threads_making_new_keys_never_raises():
    from jax._src import util  # JAX's registry of caches that clear_caches clears

    registry = getattr(util, "_caches", None)

    @af.filter_jit
    def step(x, name):
        return x + len(name)

    step(jnp.ones(2), "warm")
    before = None if registry is None else len(registry)
    stop = threading.Event()

    def work(i):
        if i == 0:
            while not stop.is_set():
                jax.clear_caches()
            return
        try:
            for j in range(40):
                name = f"field-{i}-{j}"  # a new static key every call
                assert float(step(jnp.ones(2), name)[0]) == 1 + len(name)
        finally:
            if i == 1:
                stop.set()

    run_threads(work, n=7)
    if registry is not None:  # arrayfield registered its caches once, at import
        assert len(registry) == before


class Tag:
    """A static field value whose comparisons are counted."""

    compared = 0

    def __eq__(self, other):
        Tag.compared += 1
        return type(other) is Tag

    def __hash__(self):
        return 0


class Tagged(eqx.Module):
    x: jax.Array
    tag: Tag = eqx.field(static=True)


def test_a_new_key_costs_the_same_however_many_came_before():
    # Each new key is compared with the newest key of its structure only, not
    # with every key made before (a pass that grew with the survey).
    @af.filter_jit
    def step(scene, name):
        return scene.x + 1

    cost = []
    for i in range(60):
        scene = Tagged(jnp.ones(2), Tag())  # equal tags, each a new object
        before = Tag.compared
        step(scene, f"field-{i}")  # a string: a new key that is not a number
        cost.append(Tag.compared - before)
    assert max(cost[-10:]) <= max(cost[1:11])


def test_a_block_in_one_thread_leaves_another_threads_warning():
    opened, finished = threading.Event(), threading.Event()

    def watch():
        with af.explain_retraces():
            opened.set()
            finished.wait(TIMEOUT)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    assert opened.wait(TIMEOUT)

    @af.filter_jit
    def step(x, rate):
        return x * rate

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for rate in range(12):  # a new Python number each call, unwatched
                step(jnp.ones(2), rate)
    finally:
        finished.set()
        watcher.join(TIMEOUT)
    retraces = [w for w in caught if w.category is af.RetraceWarning]
    assert len(retraces) == 1, [str(w.message) for w in caught]
    assert "rate" in str(retraces[0].message)
