"""af.filter_jit shares one program among callables that trace alike, never more.

Every case runs the same calls under `eqx.filter_jit`, `af.filter_jit` and
`af.filter_jit(share_callables=False)`: the results must be identical (bitwise,
same dtype), the trace counts exact. Sharing may only lower af.filter_jit's count.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import arrayfield as af
from arrayfield import _callable_key

# On equinox 0.12 (or a JAX whose jax.jit hides its function) af.filter_jit keys
# callables exactly as equinox does: there is nothing to share (test_jit.py covers it).
pytestmark = pytest.mark.skipif(
    not _callable_key.SUPPORTED,
    reason="callable sharing needs equinox >= 0.13 and jax.jit's parts readable",
)

X = jnp.arange(1.0, 4.0)

JITS: dict[str, Callable[..., Any]] = {
    "eqx": eqx.filter_jit,
    "af": af.filter_jit,
    "af, share_callables=False": functools.partial(
        af.filter_jit, share_callables=False
    ),
}


def _assert_same(a: Any, b: Any) -> None:
    leaves_a, tree_a = jax.tree_util.tree_flatten(a)
    leaves_b, tree_b = jax.tree_util.tree_flatten(b)
    assert tree_a == tree_b
    for x, y in zip(leaves_a, leaves_b, strict=True):
        if isinstance(x, jax.Array):
            assert x.dtype == y.dtype and x.shape == y.shape
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y), strict=True)
        else:
            assert x == y


def trace_counts(
    calls: Sequence[Any], step: Callable[[jax.Array, Any], Any] | None = None
) -> dict[str, int]:
    """Call `step(X, c)` for each `c` under each jit; the results must agree."""

    def apply(x: jax.Array, c: Any) -> Any:
        return c(x)

    body = step or apply
    counts, results = {}, {}
    for name, jit in JITS.items():
        traces: list[None] = []

        def traced(x, c, traces=traces):
            traces.append(None)  # runs only while tracing
            return body(x, c)

        jitted = jit(traced)
        results[name] = [jitted(X, c) for c in calls]
        counts[name] = len(traces)
    for name in JITS:
        for a, b in zip(results["eqx"], results[name], strict=True):
            _assert_same(a, b)
    assert counts["af, share_callables=False"] == counts["eqx"]
    return counts


def shared(calls: Sequence[Any], **kwargs: Any) -> int:
    """af.filter_jit's trace count, asserting equinox traces once per call."""
    counts = trace_counts(calls, **kwargs)
    assert counts["eqx"] == len(calls)
    return counts["af"]


# -- what is shared ----------------------------------------------------------------


def relative_step(x, factor):
    return factor * x


def test_partials_of_one_function_with_equal_arguments_share_a_program():
    calls = [functools.partial(relative_step, factor=0.1) for _ in range(4)]
    assert shared(calls) == 1


def test_partials_of_partials_share_recursively():
    calls = [
        functools.partial(functools.partial(relative_step), factor=0.5)
        for _ in range(3)
    ]
    assert shared(calls) == 1


def make_scaled(scale):
    return lambda x: scale * x


def test_closures_of_one_code_object_with_equal_captured_values_share():
    assert shared([make_scaled(2.0) for _ in range(4)]) == 1


def test_identity_lambdas_made_per_instance_share():
    assert shared([(lambda x: x) for _ in range(3)]) == 1


@dataclasses.dataclass(frozen=True)
class Psf:
    """A per-field helper with value equality (a frozen dataclass)."""

    width: float

    def apply(self, x):
        return x / self.width


def test_bound_methods_of_equal_helpers_share():
    assert shared([Psf(2.0).apply for _ in range(3)]) == 1


def test_jax_jit_wrappers_of_equal_functions_share():
    assert shared([jax.jit(make_scaled(3.0)) for _ in range(3)]) == 1


class Holder(eqx.Module):
    fn: Any

    def __call__(self, x):
        return self.fn(x)


def test_filter_jit_wrappers_held_by_a_module_share():
    for wrap in (eqx.filter_jit, af.filter_jit):
        assert shared([Holder(wrap(make_scaled(3.0))) for _ in range(3)]) == 1


class Renderer(af.ArrayModule):
    gain: jax.Array
    render: Callable = af.field(static=True)

    def __call__(self, x):
        return self.gain * self.render(x)


def test_callables_in_static_fields_share():
    assert shared([Renderer(gain=2.0, render=lambda x: x**2) for _ in range(3)]) == 1


def test_a_recursive_closure_shares_with_its_twin():
    def make():
        def power(x, n=3):
            return x if n == 1 else x * power(x, n - 1)

        return power

    assert shared([make() for _ in range(3)]) == 1


def test_outputs_give_back_the_callers_own_callables():
    @af.filter_jit
    def step(scene, x):
        return scene, scene(x)

    scenes = [Renderer(gain=2.0, render=lambda x: x + 1.0) for _ in range(3)]
    holders = [Holder(lambda x: x - 1.0) for _ in range(3)]
    for scene, holder in zip(scenes, holders, strict=True):
        out, _ = step(scene, X)
        assert out.render is scene.render  # a static field passed through
        out_holder, _ = step(holder, X)
        assert out_holder.fn is holder.fn  # a leaf passed through


def test_share_callables_false_keys_by_identity():
    traces = []

    @functools.partial(af.filter_jit, share_callables=False)
    def step(x, c):
        traces.append(None)
        return c(x)

    for _ in range(3):
        step(X, lambda x: x)
    assert len(traces) == 3


# -- what is never shared: each pair traces differently -------------------------------


def test_captured_values_that_differ_are_not_shared():
    assert shared([make_scaled(2.0), make_scaled(3.0), make_scaled(2.0)]) == 2


def test_zero_and_negative_zero_are_not_shared():
    def reciprocal(c):
        return lambda x: 1.0 / (0.0 * x + c)

    assert shared([reciprocal(0.0), reciprocal(-0.0)]) == 2
    f32 = np.float32
    assert shared([reciprocal(f32(0.0)), reciprocal(f32(-0.0))]) == 2


def test_equal_values_of_different_types_are_not_shared():
    # 1, 1.0 and True are == but give int, float and bool results
    assert shared([make_scaled(1), make_scaled(1.0), make_scaled(True)]) == 3


def test_defaults_and_keyword_defaults_that_differ_are_not_shared():
    def with_default(d):
        def f(x, scale=d):
            return scale * x

        return f

    def with_keyword_default(d):
        def f(x, *, scale=d):
            return scale * x

        return f

    assert shared([with_default(2.0), with_default(3.0)]) == 2
    assert shared([with_keyword_default(2.0), with_keyword_default(3.0)]) == 2


def test_functions_of_different_globals_are_not_shared():
    uses_global = eval("lambda x: SCALE * x", {}).__code__
    # One code object, two globals dicts: what SCALE reads differs.
    calls = [types.FunctionType(uses_global, {"SCALE": s}) for s in (2.0, 3.0)]
    assert shared(calls) == 2


def test_captured_arrays_compare_by_identity():
    def with_array(a):
        return lambda x: a * x

    same_values = [with_array(jnp.array(2.0)) for _ in range(2)]
    assert shared(same_values) == 2
    assert shared([with_array(jnp.array(2.0)), with_array(jnp.array(3.0))]) == 2
    numpy = [with_array(np.array(2.0)), with_array(np.array(3.0))]
    assert shared(numpy) == 2


def test_captured_mutable_objects_compare_by_identity():
    def with_list(values):
        return lambda x: values[0] * x

    assert shared([with_list([2.0]), with_list([3.0])]) == 2
    assert shared([with_list([2.0]), with_list([2.0])]) == 2

    class Config:  # no value equality
        def __init__(self, scale):
            self.scale = scale

    def with_config(config):
        return lambda x: config.scale * x

    assert shared([with_config(Config(2.0)), with_config(Config(2.0))]) == 2


def test_nested_closures_that_differ_are_not_shared():
    def outer(scale):
        inner = make_scaled(scale)
        return lambda x: inner(x) + 1.0

    assert shared([outer(2.0), outer(3.0), outer(2.0)]) == 2


def test_function_attributes_that_differ_are_not_shared():
    def make(scale):
        def f(x):
            return x

        f.scale = scale
        return f

    def uses_attribute(x, f):
        return f.scale * f(x)

    assert shared([make(2.0), make(3.0)], step=uses_attribute) == 2


def scale_first(factor, x):
    return factor * x


def test_partial_arguments_that_differ_are_not_shared():
    keywords = [functools.partial(relative_step, factor=f) for f in (0.1, 0.2)]
    assert shared(keywords) == 2
    positional = [functools.partial(scale_first, f) for f in (0.1, 0.2, 0.1)]
    assert shared(positional) == 2


def test_bound_methods_of_unequal_or_identity_helpers_are_not_shared():
    assert shared([Psf(2.0).apply, Psf(3.0).apply]) == 2

    class Plain:
        def apply(self, x):
            return 2.0 * x

    assert shared([Plain().apply, Plain().apply]) == 2


def test_subclass_instances_are_not_shared_with_their_base():
    @dataclasses.dataclass(frozen=True)
    class WidePsf(Psf):
        def apply(self, x):
            return x / (2 * self.width)

    assert WidePsf(2.0) == WidePsf(2.0)
    assert shared([Psf(2.0).apply, WidePsf(2.0).apply]) == 2


def test_jax_jit_wrappers_with_different_options_are_not_shared():
    f = make_scaled(3.0)
    assert shared([jax.jit(f), jax.jit(f, inline=True)]) == 2


def test_different_code_objects_are_not_shared():
    plus_one = lambda x: x + 1.0  # noqa: E731
    plus_two = lambda x: x + 2.0  # noqa: E731
    assert shared([plus_one, plus_two]) == 2


# -- the jitted function itself ------------------------------------------------------


def _jitted_per_field(jit, make, n):
    """`jit(make(field))` called once per field: the traces of all of them."""
    traces: list[None] = []
    results = []
    for field in range(n):
        fun = make(field, traces)
        results.append(jit(fun)(X))
    return len(traces), results


def test_a_new_equal_closure_jitted_per_field_shares_its_programs():
    def make(field, traces, scale=2.0):
        def step(x):
            traces.append(None)
            return scale * x

        return step

    af_traces, af_results = _jitted_per_field(af.filter_jit, make, 4)
    eqx_traces, eqx_results = _jitted_per_field(eqx.filter_jit, make, 4)
    assert (af_traces, eqx_traces) == (1, 4)
    for a, b in zip(af_results, eqx_results, strict=True):
        _assert_same(a, b)
    off = functools.partial(af.filter_jit, share_callables=False)
    assert _jitted_per_field(off, make, 4)[0] == 4


def test_closures_jitted_per_field_with_different_captures_do_not_share():
    def make(field, traces):
        scale = 1.0 + field % 2  # two values over four fields

        def step(x):
            traces.append(None)
            return scale * x

        return step

    af_traces, af_results = _jitted_per_field(af.filter_jit, make, 4)
    _eqx_traces, eqx_results = _jitted_per_field(eqx.filter_jit, make, 4)
    assert af_traces == 2
    for a, b in zip(af_results, eqx_results, strict=True):
        _assert_same(a, b)


def test_jax_jit_parts_are_readable_where_jax_keeps_them():
    # The private attributes sharing reads (check_compatible names them if moved).
    from arrayfield import _internals

    f = make_scaled(3.0)
    fun, options = _internals.jit_parts(jax.jit(f)) or (None, None)
    assert fun is f
    assert options == _internals.jit_parts(jax.jit(f))[1]
    assert options != _internals.jit_parts(jax.jit(f, inline=True))[1]
    _internals.check_compatible()


class Tagged(eqx.Module):
    render: Callable
    level: Any = eqx.field(static=True)


def test_a_passed_through_static_number_is_the_callers_own():
    # 1 == True, so the two calls share a program once the lambdas are shared;
    # each gets back its own static value, as under eqx.filter_jit.
    for jit in JITS.values():
        step = jit(lambda scene, x: (scene, scene.render(x)))
        for level in (1, True, 1.0):
            out, _ = step(Tagged(lambda x: x, level), X)
            assert type(out.level) is type(level)


# -- module globals: read when the trace runs ----------------------------------------

GAIN = 2.0  # a module global the functions below read; tests rebind it


def set_gain(value: float) -> None:
    global GAIN
    GAIN = value


def gained(x, offset):
    return x * GAIN + offset


def calls_gained(x, offset):
    return gained(x, offset)  # reads GAIN through the global function it calls


def with_nested_code(x):
    inner = lambda y: y * GAIN  # noqa: E731 (GAIN is read by the nested code object)
    return inner(x)


def closure_reading_gain(offset):
    def inner(x):
        return x * GAIN + offset

    return inner


def agree(run: Callable[[Callable[..., Any]], list]) -> dict[str, list]:
    """`run(jit)` under each jit, from GAIN = 2.0: the results must be identical."""
    results = {}
    try:
        for name, jit in JITS.items():
            set_gain(2.0)
            results[name] = run(jit)
    finally:
        set_gain(2.0)
    for name in JITS:
        for a, b in zip(results["eqx"], results[name], strict=True):
            _assert_same(a, b)
    return results


def test_a_global_rebound_between_two_wrappers_is_read_again():
    def run(jit):
        make = lambda: jit(lambda x: x * GAIN)  # noqa: E731 (a new function per call)
        first = make()(X)
        set_gain(3.0)
        return [first, make()(X)]

    results = agree(run)
    np.testing.assert_array_equal(results["af"][1], 3.0 * X)


def test_the_same_wrapper_keeps_its_trace_after_a_rebind_as_in_equinox():
    def run(jit):
        jitted = jit(lambda x: x * GAIN)
        first = jitted(X)
        set_gain(3.0)
        return [first, jitted(X)]  # JAX's rule: a trace is not redone for a global

    results = agree(run)
    np.testing.assert_array_equal(results["af"][1], 2.0 * X)


def test_partials_of_a_global_reading_function_see_a_rebind():
    def run(jit):
        results = []
        for fun in (gained, calls_gained):
            jitted = jit(lambda x, f: f(x))
            results.append(jitted(X, functools.partial(fun, offset=1.0)))
            set_gain(3.0)
            results.append(jitted(X, functools.partial(fun, offset=1.0)))
            results.append(jit(functools.partial(fun, offset=1.0))(X))
            set_gain(2.0)
        return results

    results = agree(run)
    np.testing.assert_array_equal(results["af"][1], 3.0 * X + 1.0)


def test_nested_code_and_closures_reading_a_global_see_a_rebind():
    def run(jit):
        jitted = jit(lambda x, f: f(x))
        results = []
        for make in (lambda: closure_reading_gain(1.0), lambda: with_nested_code):
            results.append(jitted(X, make()))
            results.append(jit(make())(X))
            set_gain(3.0)
            results.append(jitted(X, make()))
            results.append(jit(make())(X))
            set_gain(2.0)
        return results

    agree(run)


def test_a_layout_traced_again_after_a_rebind_is_no_longer_shared():
    def run(jit):
        make = lambda: jit(lambda x: x * GAIN)  # noqa: E731
        first = make()
        results = [first(X)]
        set_gain(3.0)
        results.append(first(X[:2]))  # a new shape: traced with GAIN = 3.0
        set_gain(2.0)
        results.append(make()(X[:2]))  # GAIN as when `first` was made, not as traced
        return results

    results = agree(run)
    np.testing.assert_array_equal(results["af"][2], 2.0 * X[:2])


def test_unchanged_globals_and_module_globals_still_share():
    def make(field, traces):
        def step(x):
            traces.append(None)
            return jnp.sin(x) * GAIN  # jnp, a module, compares by identity

        return step

    assert _jitted_per_field(af.filter_jit, make, 4)[0] == 1
    assert _jitted_per_field(eqx.filter_jit, make, 4)[0] == 4
    calls = [functools.partial(calls_gained, offset=1.0) for _ in range(3)]
    assert shared(calls) == 1


def test_global_names_cover_nested_code_and_leave_out_attributes():
    names = _callable_key.global_names(with_nested_code.__code__)
    assert names == ("GAIN",)
    assert _callable_key.global_names(calls_gained.__code__) == ("gained",)


def test_a_program_traced_again_after_a_rebind_is_no_longer_shared():
    def run(jit):
        jitted = jit(lambda x, f: f(x))
        first = functools.partial(gained, offset=1.0)
        results = [jitted(X, first)]
        set_gain(3.0)
        results.append(jitted(X[:2], first))  # a new shape: traced with GAIN = 3.0
        set_gain(2.0)  # a new equal partial, GAIN as when `first` first traced
        results.append(jitted(X[:2], functools.partial(gained, offset=1.0)))
        return results

    results = agree(run)
    np.testing.assert_array_equal(results["af"][2], 2.0 * X[:2] + 1.0)


def test_a_wrapper_made_before_a_rebind_and_first_called_after_it_reads_it():
    # Under eqx.filter_jit the second function traces at its first call, after
    # the rebind; sharing the first one's programs would run GAIN = 2.0.
    def run(jit):
        make = lambda: jit(lambda x: x * GAIN)  # noqa: E731 (a new function per call)
        first, second = make(), make()
        results = [first(X)]
        set_gain(3.0)
        results += [second(X), first(X), make()(X)]
        return results

    results = agree(run)
    np.testing.assert_array_equal(results["af"][1], 3.0 * X)
    np.testing.assert_array_equal(results["af"][2], 2.0 * X)  # keeps its trace


def test_a_wrapper_given_its_own_layout_stops_comparing_equal_to_the_old_ones():
    # A wrapper's plan is a static field, so part of every tree holding it.
    try:
        calls = [af.filter_jit(lambda x: x * GAIN) for _ in range(3)]
        first, second, third = (call._plan for call in calls)
        assert first == second == third  # equal functions: one layout
        before = hash(first)
        calls[0](X)
        set_gain(3.0)
        calls[1](X)
        assert second != first
        calls[2](X)  # made with the others, first called after the rebind too
        assert third == second != first
        assert hash(first) == hash(second) == before  # a first call keeps the hash
    finally:
        set_gain(2.0)


def test_sharers_called_with_a_new_shape_after_a_rebind_read_it():
    def run(jit):
        make = lambda: jit(lambda x: x * GAIN)  # noqa: E731
        first, second = make(), make()
        results = [first(X), second(X)]  # both before the rebind: one program
        set_gain(3.0)
        results += [second(X[:2]), first(X[:2]), first(X), second(X)]
        jitted = jit(lambda x, f: f(x))
        partials = [functools.partial(gained, offset=1.0) for _ in range(2)]
        set_gain(2.0)
        results += [jitted(X, p) for p in partials]
        set_gain(3.0)
        results += [jitted(X[:2], p) for p in reversed(partials)]
        results += [jitted(X, p) for p in partials]
        return results

    agree(run)


# After a rebind each callable runs what its own cache would hold under
# eqx.filter_jit: its own traces, and a new trace for a signature new to it,
# even where another callable sharing its programs traced that signature before.


def counting_closure(traces: list) -> Callable[[jax.Array], jax.Array]:
    def step(x):
        traces.append(None)  # runs only while tracing
        return x * GAIN

    return step


def counting_gained(x, offset, traces):
    traces.append(None)
    return x * GAIN + offset


def test_a_shape_another_sharer_traced_before_a_rebind_is_traced_anew():
    def run(jit):
        first, second = jit(counting_closure([])), jit(counting_closure([]))
        results = [first(X), second(X), first(X[:2])]
        set_gain(3.0)
        # second: X[:2] is new to it (3.0) and X its own (2.0); first keeps both.
        results += [second(X[:2]), first(X[:2]), second(X), first(X)]
        return results

    results = agree(run)
    np.testing.assert_array_equal(results["af"][3], 3.0 * X[:2])
    np.testing.assert_array_equal(results["af"][4], 2.0 * X[:2])
    np.testing.assert_array_equal(results["af"][5], 2.0 * X)
    # Shared before the rebind (second's X), traced anew after it (its X[:2]).
    counts = {}
    for name, jit in (("eqx", eqx.filter_jit), ("af", af.filter_jit)):
        mine: list = []
        first, second = jit(counting_closure(mine)), jit(counting_closure(mine))
        try:
            first(X), second(X), first(X[:2])
            set_gain(3.0)
            second(X[:2]), first(X[:2]), second(X)
        finally:
            set_gain(2.0)
        counts[name] = len(mine)
    assert counts == {"eqx": 4, "af": 3}


def test_a_signature_traced_between_two_rebinds_serves_no_other_sharer():
    def run(jit):
        make = lambda: jit(lambda x: x * GAIN)  # noqa: E731 (a new function per call)
        first, second = make(), make()
        results = [first(X), second(X)]
        set_gain(3.0)
        results.append(first(X[:2]))  # first's own trace: 3.0
        set_gain(4.0)
        results += [second(X[:2]), first(X[:2]), make()(X[:2])]
        set_gain(3.0)
        results += [make()(X[:2]), second(X[:2])]
        return results

    results = agree(run)
    gains = [2.0, 2.0, 3.0, 4.0, 3.0, 4.0, 3.0, 4.0]
    for got, gain in zip(results["af"], gains, strict=True):
        np.testing.assert_array_equal(got, gain * X[: got.shape[0]])


def test_static_callables_sharing_a_program_keep_their_own_traces_past_a_rebind():
    def run(jit):
        jitted = jit(lambda x, f: f(x))
        one, two = (functools.partial(gained, offset=1.0) for _ in range(2))
        results = [jitted(X, one), jitted(X, two), jitted(X[:2], one)]
        set_gain(3.0)
        results += [jitted(X[:2], two), jitted(X[:2], one), jitted(X, two)]
        set_gain(4.0)
        three = functools.partial(gained, offset=1.0)
        results += [jitted(X[:2], three), jitted(X, three), jitted(X[:2], two)]
        return results

    results = agree(run)
    np.testing.assert_array_equal(results["af"][3], 3.0 * X[:2] + 1.0)
    np.testing.assert_array_equal(results["af"][4], 2.0 * X[:2] + 1.0)
    np.testing.assert_array_equal(results["af"][6], 4.0 * X[:2] + 1.0)

    counts = {}
    for name, jit in (("eqx", eqx.filter_jit), ("af", af.filter_jit)):
        traces: list = []
        jitted = jit(lambda x, f: f(x))
        one, two = (
            functools.partial(counting_gained, offset=1.0, traces=traces)
            for _ in range(2)
        )
        try:
            jitted(X, one), jitted(X, two), jitted(X[:2], one)
            set_gain(3.0)
            jitted(X[:2], two), jitted(X, two)
        finally:
            set_gain(2.0)
        counts[name] = len(traces)
    assert counts == {"eqx": 4, "af": 3}


@pytest.mark.parametrize("donate", ["all", "all-except-first", "warn", "none"])
def test_donating_sharers_read_a_rebind_as_in_equinox(donate):
    # Donating calls pass the leaves in parts: the signature reads them all.
    def run(jit):
        make = lambda: jit(lambda x, y: x * GAIN + y, donate=donate)  # noqa: E731
        first, second = make(), make()
        fresh = lambda n: (X[:n] + 0, X[:n] + 0)  # noqa: E731 (donated buffers)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # donation unused on the CPU
            results = [first(*fresh(3)), second(*fresh(3)), first(*fresh(2))]
            set_gain(3.0)
            results += [second(*fresh(2)), first(*fresh(2)), second(*fresh(3))]
        return results

    results = agree(run)
    np.testing.assert_array_equal(results["af"][3], 4.0 * X[:2])
    np.testing.assert_array_equal(results["af"][4], 3.0 * X[:2])


CONFIG = types.ModuleType("config")  # a module whose attribute a test rebinds
CONFIG.GAIN = 2.0


def test_a_module_attribute_rebound_between_two_wrappers_is_read_again():
    def run(jit):
        make = lambda: jit(lambda x: x * CONFIG.GAIN)  # noqa: E731
        try:
            first = make()(X)
            CONFIG.GAIN = 3.0
            return [first, make()(X)]
        finally:
            CONFIG.GAIN = 2.0

    results = agree(run)
    np.testing.assert_array_equal(results["af"][1], 3.0 * X)
    # Unchanged, the attribute stands in the way of nothing.
    traces: list = []

    def make_counting():
        def step(x):
            traces.append(None)
            return x * CONFIG.GAIN

        return step

    for _ in range(3):
        af.filter_jit(make_counting())(X)
    assert len(traces) == (1 if _callable_key.SUPPORTED else 3)


FAIL = [False]  # set by a test: the function below raises while tracing


def failing_closure():
    def step(x):
        if FAIL[0]:
            raise ValueError("not ready")
        return x * GAIN

    return step


Y = jnp.arange(1.0, 6.0)


@pytest.mark.parametrize("between", ["eager call", "jax.clear_caches", "failed trace"])
def test_what_a_sharer_reuses_is_the_trace_jax_kept(between):
    # The history of a program is that of its traces that JAX keeps: not an
    # eager call under jax.disable_jit, the latest trace after clear_caches,
    # nothing for a trace that raised.
    def run(jit):
        first, second = jit(failing_closure()), jit(failing_closure())
        results = [first(Y), second(Y)]  # one layout, two callables
        if between == "eager call":
            with jax.disable_jit():
                results.append(first(X))
        elif between == "jax.clear_caches":
            results.append(first(X))
            jax.clear_caches()
        else:
            FAIL[0] = True
            with pytest.raises(ValueError):
                first(X)
            FAIL[0] = False
        set_gain(3.0)
        results.append(first(X))  # traced now, under 3.0
        set_gain(2.0)
        results.append(second(X))  # new to second: under 2.0, as under eqx
        return results

    results = agree(run)
    np.testing.assert_array_equal(results["af"][-1], 2.0 * X)


def test_wrappers_of_a_function_share_its_traces_wherever_its_layout_went():
    def run(jit):
        one, two = closure_reading_gain(0.0), closure_reading_gain(0.0)
        results = [jit(one)(X)]
        made_before = jit(two)
        results.append(jit(two)(Y))  # two joins one's layout
        set_gain(3.0)
        results.append(made_before(Y))  # two's own trace: 2.0
        three = closure_reading_gain(0.0)
        waiting = jit(three)
        results.append(jit(three)(X))  # three moves (rebound since): 3.0
        set_gain(4.0)
        results += [waiting(X), jit(three)(X)]  # three's trace, where it went
        return results

    results = agree(run)
    gains = [2.0, 2.0, 2.0, 3.0, 3.0, 3.0]
    for got, gain in zip(results["af"], gains, strict=True):
        np.testing.assert_array_equal(got, gain * (X if got.shape == X.shape else Y))
