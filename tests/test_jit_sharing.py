"""af.filter_jit shares compiles, never traces: every call traces exactly when
eqx.filter_jit would, and a trace that is a program compiled before runs that
executable. Each test counts XLA compiles (JAX's backend-compile events) next to
eqx.filter_jit's, and checks results bitwise, dtypes and trace counts against it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import arrayfield as af
from arrayfield import _jax_private
from helpers import ENV, assert_bitwise, compiles_of

needs_sharing = pytest.mark.skipif(
    _jax_private.sharing_problem() is not None,
    reason="sharing compiles needs a JAX whose traced jits show their program",
)


def both(run: Callable[[Callable[..., Any]], list], name: str) -> dict[str, Any]:
    """`run(jit)` under each jit from a cold cache: outputs (checked alike,
    bitwise), and each jit's compile count."""
    results: dict[str, Any] = {}
    for label, jit in {"eqx": eqx.filter_jit, "af": af.filter_jit}.items():
        jax.clear_caches()
        with compiles_of(name) as compiled:
            outputs = run(jit)
        results[label] = (outputs, len(compiled))
    for a, b in zip(results["eqx"][0], results["af"][0], strict=True):
        assert_bitwise(a, b)
    return {label: count for label, (_, count) in results.items()}


class Renderer:  # compared by identity, as scarlet2's helpers are
    def __call__(self, x):
        return x * 2.0


def apply(x, f):
    return f(x)


@needs_sharing
def test_callables_compared_by_identity_trace_again_but_compile_once():
    traces = []

    def run(jit):
        step = jit(lambda x, f: (traces.append(1), f(x))[1])
        return [step(jnp.ones(3) * k, Renderer()) for k in range(5)]

    assert both(run, "<lambda>") == {"eqx": 5, "af": 1}
    assert len(traces) == 10  # five traces under each jit


@needs_sharing
def test_a_new_wrapper_per_fit_finds_the_first_fits_program():
    made = lambda jit: [fit(jit, s) for s in (0.1, 0.2, 0.3)]  # noqa: E731
    assert both(made, "step") == {"eqx": 3, "af": 1}


def fit(jit, scale):
    def step(x):  # a new function object per fit: a new cache for each
        return jnp.tanh(x) * 3.0

    return jit(step)(jnp.full(4, scale))


@needs_sharing
def test_each_call_gets_its_own_static_outputs():
    @dataclasses.dataclass(frozen=True, eq=False)
    class Tag:
        name: str

    def run(jit):
        step = jit(lambda x, tag: (x + 1, tag))
        tags = [Tag(f"field-{i}") for i in range(3)]
        outputs = [step(jnp.ones(2), tag) for tag in tags]
        assert [out[1] for out in outputs] == tags  # each its own object
        return [out[0] for out in outputs]

    assert both(run, "<lambda>") == {"eqx": 3, "af": 1}


@needs_sharing
def test_outputs_equal_to_an_earlier_trace_s_are_still_this_call_s_own():
    # One program for every call (the second leaf only names the field); the
    # returned numbers are equal (1 == 1.0 == True, 0.0 == -0.0) but not the
    # same objects, so each call returns what its own trace returned.
    # The number comes back as a Module's static field: a node of the output's
    # tree, which the executable compiled for the first call would rebuild.
    class Out(eqx.Module):
        x: jax.Array
        value: Any = eqx.field(static=True)

    def run(jit):
        step = jit(lambda x, static: Out(x + 1, static[0]))
        values = [1, 1.0, True, 0.0, -0.0]
        outputs = [step(jnp.ones(2), (v, f"field-{i}")) for i, v in enumerate(values)]
        got = [(type(out.value), repr(out.value)) for out in outputs]
        assert got == [(type(v), repr(v)) for v in values]
        return [out.x for out in outputs]

    assert both(run, "<lambda>") == {"eqx": 5, "af": 1}


@needs_sharing
def test_what_a_trace_reads_makes_the_program():
    # A captured number, a dict read at trace time, 1 against 1.0: what the trace
    # read is in its program, so the values are eqx's.
    def run(jit):
        gains = {"gain": 2.0}
        step = jit(apply)
        out = [step(jnp.ones(2), lambda x, i=i: x * i) for i in range(3)]
        out.append(step(jnp.ones(2), lambda x: x * gains["gain"]))
        gains["gain"] = 3.0
        out.append(step(jnp.ones(2), lambda x: x * gains["gain"]))
        out += [
            step(jnp.ones(2), lambda x, w=w: jnp.full(x.shape, w)) for w in (1, 1.0)
        ]
        return out

    # Seven traces under both; `x * 2` (i=2) and `x * gains["gain"]` at 2.0 trace
    # to the same program (JAX converts the literal: `mul x 2.0:f32[]`), so
    # af.filter_jit compiles six.
    assert both(run, "apply") == {"eqx": 7, "af": 6}


@needs_sharing
def test_zero_and_negative_zero_are_different_programs():
    def run(jit):
        step = jit(apply)
        return [step(jnp.ones(2), lambda x, z=z: x * z) for z in (0.0, -0.0, 0.0)]

    counts = both(run, "apply")
    assert counts == {"eqx": 3, "af": 2}


@needs_sharing
def test_captured_arrays_share_by_value_and_stay_embedded():
    data = np.random.default_rng(0).normal(size=512).astype(np.float32)

    def run(jit):
        step = jit(apply)
        captured = [jnp.asarray(data), jnp.asarray(data), jnp.asarray(data + 1)]
        return [step(jnp.ones(512), lambda x, c=c: x + jnp.exp(c)) for c in captured]

    # Equal bytes: one program; other bytes: another. Embedded as eqx embeds them,
    # so exp is folded alike and the results agree bitwise (checked by `both`).
    assert both(run, "apply") == {"eqx": 3, "af": 2}


@needs_sharing
def test_a_program_key_holds_no_copy_of_a_captured_array():
    # A loop of fields each capturing a fresh 1 MB array must not keep 1 MB of
    # key per field: large constants are keyed by a digest of their bytes.
    from arrayfield._program_key import program_key

    big = jnp.asarray(np.random.default_rng(1).normal(size=(256, 1024)), jnp.float32)
    traced = jax.jit(lambda x: x + big).trace(jnp.ones((256, 1024)))
    sizes = []

    def walk(node: Any) -> None:
        if isinstance(node, bytes):
            sizes.append(len(node))
        elif isinstance(node, tuple):
            for item in node:
                walk(item)

    walk(program_key(traced))
    assert sizes and max(sizes) <= 64
    changed = big.at[0, 0].add(1.0)  # one element differs
    other = jax.jit(lambda x: x + changed).trace(jnp.ones((256, 1024)))
    copy = jnp.array(big)  # another buffer, the same bytes
    same = jax.jit(lambda x: x + copy).trace(jnp.ones((256, 1024)))
    assert program_key(other) != program_key(traced)
    assert program_key(same) == program_key(traced)  # a copy: equal bytes


@needs_sharing
def test_custom_jvp_rules_made_per_trace_do_not_stop_sharing():
    def make_relu():
        @jax.custom_jvp
        def relu(x):
            return jnp.maximum(x, 0.0)

        relu.defjvp(lambda primals, tangents: (relu(*primals), tangents[0] * 1.0))
        return relu

    def run(jit):
        step = jit(apply)
        out = [step(jnp.linspace(-1, 1, 5), make_relu()) for _ in range(3)]
        grad = jax.grad(lambda x: step(x, make_relu()).sum())(jnp.linspace(-1, 1, 5))
        return [*out, grad]

    # Three forward programs (eqx: 3, af: 1), and the gradient's own two (its JVP
    # and transpose, traced through the wrapper) under both.
    assert both(run, "apply") == {"eqx": 5, "af": 3}


@needs_sharing
def test_programs_that_call_back_into_python_are_never_shared():
    def run(jit):
        step = jit(apply)
        out = [
            step(
                jnp.ones(2),
                lambda x, i=i: jax.pure_callback(
                    lambda v: np.asarray(v) * i,
                    jax.ShapeDtypeStruct((2,), jnp.float32),
                    x,
                ),
            )
            for i in range(3)
        ]
        return out

    assert both(run, "apply") == {"eqx": 3, "af": 3}


@needs_sharing
def test_share_compiles_false_compiles_every_trace():
    off = functools.partial(af.filter_jit, share_compiles=False)
    jax.clear_caches()
    with compiles_of("apply") as compiled:
        step = off(apply)
        for _ in range(3):
            step(jnp.ones(2), Renderer())
    assert len(compiled) == 3


@needs_sharing
def test_x64_switched_on_is_another_program():
    def run(jit):
        step = jit(lambda x, f: f(x) + jnp.arange(2))
        first = step(jnp.ones(2), Renderer())
        with jax.enable_x64(True):
            second = step(jnp.ones(2), Renderer())
        return [first, second]

    counts = both(run, "<lambda>")
    assert counts == {"eqx": 2, "af": 2}


@needs_sharing
@pytest.mark.parametrize("donate", ["all", "all-except-first", "warn", "none"])
def test_donating_calls_share_and_agree(donate):
    def run(jit):
        step = jit(lambda x, f: f(x), donate=donate)
        return [step(jnp.ones(3) * k, Renderer()) for k in range(3)]

    assert both(run, "<lambda>") == {"eqx": 3, "af": 1}


SECOND_PROCESS = textwrap.dedent(
    """
    import sys
    import jax, jax.numpy as jnp
    import arrayfield as af
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    # JAX 0.10 reports a program read from the persistent cache as a backend
    # compile too, after a cache-hit event: those are reads, not compiles.
    compiles, hit = [], []
    jax.monitoring.register_event_listener(
        lambda event, **kw: hit.append(1)
        if event == "/jax/compilation_cache/cache_hits" else None
    )

    def on_duration(event, duration, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            if hit:
                hit.clear()
            else:
                compiles.append(kw.get("fun_name"))

    jax.monitoring.register_event_duration_secs_listener(on_duration)

    class Renderer:
        def __call__(self, x):
            return jnp.tanh(x) * 2.0

    @af.filter_jit
    def step(x, render):
        return render(x).sum()

    for field in range(3):
        value = step(jnp.full(8, float(field)), Renderer())
    print(float(value), sum("step" in str(name) for name in compiles))
    """
)


@needs_sharing
def test_a_second_process_reads_every_program_from_the_persistent_cache(tmp_path):
    cache = tmp_path / "jax-cache"
    runs = [
        subprocess.run(
            [sys.executable, "-c", SECOND_PROCESS, str(cache)],
            env={**ENV, **{"XLA_FLAGS": os.environ.get("XLA_FLAGS", "")}},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for _ in range(2)
    ]
    assert runs[0][0] == runs[1][0]
    assert (runs[0][1], runs[1][1]) == ("1", "0")  # three fields, one compile


TWO_DEVICES = textwrap.dedent(
    """
    import equinox as eqx, jax, jax.numpy as jnp, numpy as np
    import arrayfield as af

    class Renderer:
        def __call__(self, x):
            return x * 2.0

    first, second = jax.devices()[:2]
    for jit in (eqx.filter_jit, af.filter_jit):
        step = jit(lambda x, f: f(x))
        on_default = step(jnp.ones(3), Renderer())
        on_second = step(jax.device_put(jnp.ones(3), second), Renderer())
        assert on_second.devices() == {second}, jit
        assert on_default.devices() == {first}, jit
        np.testing.assert_array_equal(on_second, on_default)
    print("ok")
    """
)


@needs_sharing
def test_a_program_compiled_for_one_device_never_runs_arrays_committed_to_another():
    result = subprocess.run(
        [sys.executable, "-c", TWO_DEVICES],
        env={**ENV, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"


@pytest.mark.parametrize("share", [True, False])
def test_a_new_shape_traces_with_the_static_values_this_call_passed(share):
    # 1 and True (0.0 and -0.0) are one cache key; JAX traces a new shape with
    # the value the call passed, not the one that made the key.
    def run(jit):
        seen = []
        f = jit(lambda x, k: (seen.append(repr(k)), x * k)[1])
        out = [f(jnp.ones(2), 1), f(jnp.ones(2), True), f(jnp.ones(3), True)]
        out += [f(jnp.ones(2), 0.0), f(jnp.ones(2), -0.0), f(jnp.ones(4), -0.0)]
        return seen, out

    af_jit = functools.partial(af.filter_jit, share_compiles=share)
    (af_seen, af_out), (eqx_seen, eqx_out) = run(af_jit), run(eqx.filter_jit)
    assert af_seen == eqx_seen == ["1", "True", "0.0", "-0.0"]
    for a, b in zip(af_out, eqx_out, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(np.signbit(a), np.signbit(b))
        np.testing.assert_array_equal(a, b)


def _step(jit: Callable[..., Any]) -> Callable[..., Any]:
    def step(x):  # a new function object per field: a new cache for each
        return jnp.log(x * 2.0)

    return jit(step)


@needs_sharing
@pytest.mark.parametrize(
    ("switch", "value"),
    [("jax_debug_nans", -1.0), ("jax_debug_infs", 0.0)],
)
def test_a_shared_program_checks_nans_and_infs_as_jax_jit(switch, value):
    errors: dict[str, Any] = {}
    with _switched(switch):
        for label, jit in {"eqx": eqx.filter_jit, "af": af.filter_jit}.items():
            jax.clear_caches()
            _step(jit)(jnp.ones(2))  # the first field compiles the program
            with pytest.raises(Exception) as raised:
                _step(jit)(jnp.full(2, value, jnp.float32))  # the second runs it
            errors[label] = raised.value
    assert type(errors["eqx"]) is FloatingPointError
    assert type(errors["af"]) is FloatingPointError
    assert str(errors["af"]) == str(errors["eqx"])


@needs_sharing
def test_a_shared_program_checks_key_reuse_as_jax_jit():
    def draw(jit: Callable[..., Any], key: Any) -> None:
        def step(key):  # a new function object per field
            return jax.random.normal(key, (2,))

        jit(step)(key)

    def run(jit: Callable[..., Any]) -> list[str]:
        used = jax.random.key(1)
        draw(jit, jax.random.key(0))  # the first field compiles the program
        draw(jit, used)  # the second runs it, and consumes its key
        raised = []
        for use in (lambda: draw(jit, used), lambda: jax.random.normal(used)):
            try:
                use()
            except Exception as error:  # compared below
                raised.append(type(error).__name__)
        return raised

    with _switched("jax_debug_key_reuse"):
        outcomes = {}
        for label, jit in {"eqx": eqx.filter_jit, "af": af.filter_jit}.items():
            jax.clear_caches()
            outcomes[label] = run(jit)
    assert outcomes["eqx"] == ["KeyReuseError", "KeyReuseError"]
    assert outcomes["af"] == outcomes["eqx"]


class _switched:
    """A JAX switch on inside the block, back to what it was after."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> None:
        self.before = getattr(jax.config, self.name)
        jax.config.update(self.name, True)

    def __exit__(self, *exc: object) -> None:
        jax.config.update(self.name, self.before)
