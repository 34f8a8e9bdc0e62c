"""`af.filter_jit` against `eqx.filter_jit`: same outputs, leaf by leaf, and the
same number of traces, call for call.

Each case builds one fresh function per jit from a factory (so the two caches start
empty and apart), runs the same calls through both and compares everything the
caller can see: outputs (type, dtype, shape, weak type, values; other leaves by
equality), trace counts after every call, raised errors and donated buffers.
"""

import dataclasses
import functools
import itertools
import os
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import equinox as eqx
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import optax
import pytest
from hypothesis import HealthCheck, given, settings
from jaxtyping import Array, Float, Int

import arrayfield as af
from arrayfield import _eqx_private, _jax_private, _jit, _program
from helpers import run_code

JITS = {"af": af.filter_jit, "eqx": eqx.filter_jit}


def assert_same(a: Any, b: Any) -> None:
    """Equal pytrees: structure (static fields included) and every leaf."""
    leaves_a, tree_a = jtu.tree_flatten(a)
    leaves_b, tree_b = jtu.tree_flatten(b)
    assert tree_a == tree_b
    for x, y in zip(leaves_a, leaves_b, strict=True):
        assert type(x) is type(y)
        if isinstance(x, jax.Array):
            assert (x.shape, x.dtype, x.weak_type) == (y.shape, y.dtype, y.weak_type)
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        elif isinstance(x, np.ndarray | np.generic):
            np.testing.assert_array_equal(x, y)
        else:
            assert x == y


@dataclasses.dataclass
class Run:
    outputs: list[Any]
    traces: list[int]  # the trace count after each call


def run_both(
    make: Callable[[list[int]], Callable[..., Any]],
    calls: list[Callable[[Callable[..., Any]], Any]],
    **jit_options: Any,
) -> dict[str, Run]:
    """`make(counter)` returns a fresh function appending to `counter` when traced."""
    runs = {}
    for name, jit in JITS.items():
        counter: list[int] = []
        f = jit(make(counter), **jit_options)
        outputs, traces = [], []
        for call in calls:
            outputs.append(call(f))
            traces.append(len(counter))
        runs[name] = Run(outputs, traces)
    assert runs["af"].traces == runs["eqx"].traces
    for a, b in zip(runs["af"].outputs, runs["eqx"].outputs, strict=True):
        assert_same(a, b)
    return runs


def counting(fn: Callable[..., Any]) -> Callable[[list[int]], Callable[..., Any]]:
    def make(counter: list[int]) -> Callable[..., Any]:
        @functools.wraps(fn)  # the jits bind calls to `fn`'s signature
        def traced(*args: Any, **kwargs: Any) -> Any:
            counter.append(1)  # runs only while tracing
            return fn(*args, **kwargs)

        return traced

    return make


def add(tree: Any, x: Any) -> Any:
    return jtu.tree_map(lambda leaf: leaf + x, tree)


# -- the trees --------------------------------------------------------------------


class Morph(af.ArrayModule):
    size: Float[Array, ""]
    kind: str = af.field(static=True, default="sersic")


class Source(af.ArrayModule):
    flux: Float[Array, ""]
    centre: Float[Array, "2"]
    morph: Morph


class Scene(af.ArrayModule):
    sources: list[Source]
    step: Int[Array, ""]
    label: str = af.field(static=True, default="scene")


def make_scene(n: int = 5, label: str = "scene") -> Scene:
    return Scene(
        sources=[
            Source(
                flux=1.0 + i, centre=jnp.array([i, -i], float), morph=Morph(size=2.0)
            )
            for i in range(n)
        ],
        step=0,
        label=label,
    )


class PlainCounter(eqx.Module):
    x: Any


class WithCallable(eqx.Module):
    weight: jax.Array
    activation: Callable[[Any], Any]
    note: None = None


# -- the matrix -------------------------------------------------------------------


def test_array_module_scene_traces_once_and_matches():
    scene = make_scene()
    run_both(
        counting(add),
        [lambda f: f(scene, jnp.float32(1.0)), lambda f: f(scene, jnp.float32(2.0))],
    )


def test_static_field_change_retraces_in_both():
    runs = run_both(
        counting(add),
        [
            lambda f: f(make_scene(label="a"), jnp.ones(())),
            lambda f: f(make_scene(label="a"), jnp.ones(())),
            lambda f: f(make_scene(label="b"), jnp.ones(())),
        ],
    )
    assert runs["af"].traces == [1, 1, 2]


def test_python_numbers_are_hashed_like_eqx_including_equal_values_of_other_types():
    # 1, 1.0 and True are equal and hash alike: equinox reuses the int trace for the
    # float and the bool, and so must af.filter_jit (the outputs keep the int dtype).
    runs = run_both(
        counting(add),
        [
            lambda f: f(jnp.ones(3), 1),
            lambda f: f(jnp.ones(3), 1.0),
            lambda f: f(jnp.ones(3), True),
            lambda f: f(jnp.ones(3), 2),
        ],
    )
    assert runs["af"].traces == [1, 1, 1, 2]


def test_plain_module_with_python_number_retraces_per_value_in_both():
    runs = run_both(
        counting(add),
        [lambda f, i=i: f(PlainCounter(x=i), 1) for i in range(4)],
    )
    assert runs["af"].traces == [1, 2, 3, 4]


def test_numpy_leaves_are_traced_and_share_traces_with_jax_arrays():
    runs = run_both(
        counting(lambda x, y: (x * 2, y + 1)),
        [
            lambda f: f(np.ones(3, np.float32), np.float32(2.0)),
            lambda f: f(jnp.ones(3), jnp.float32(2.0)),
            lambda f: f(np.arange(3.0), np.int32(1)),
        ],
    )
    assert runs["af"].traces == [1, 1, 2]


def _literal_leaves() -> list[Any]:
    """One leaf of each array type equinox added for recent JAX, where JAX has it."""
    leaves = []
    try:
        from jax._src.literals import TypedNdArray
    except ImportError:
        pass
    else:
        leaves.append(TypedNdArray(np.arange(3.0, dtype=np.float32), None))
    try:
        from jax._src.literals import LiteralArray
    except ImportError:
        pass
    else:
        leaves.append(LiteralArray(np.arange(3.0, dtype=np.float32)))
    return leaves


@pytest.mark.parametrize("leaf", _literal_leaves(), ids=lambda x: type(x).__name__)
def test_leaves_of_jax_literal_array_types_are_traced_as_equinox_traces_them(leaf):
    assert eqx.is_array(leaf)
    from arrayfield.diagnostics._paths import is_array

    assert is_array(leaf)  # the diagnostics see it as eqx.filter_jit does
    runs = run_both(
        counting(lambda x, y: x * y),
        [
            lambda f: f(leaf, 2.0),
            lambda f: f(np.ones(3, np.float32), 2.0),  # same abstract array
            lambda f: f(leaf, 3.0),
        ],
    )
    assert runs["af"].traces == [1, 1, 2]


def test_filter_jit_traces_exactly_the_leaf_types_eqx_is_array_accepts():
    from arrayfield.diagnostics._paths import is_array

    leaves = [
        *_literal_leaves(),
        np.ones(2),
        np.float32(1.0),
        jnp.ones(2),
        1,
        1.0,
        True,
        "a",
        None,
        jax.ShapeDtypeStruct((2,), jnp.float32),
    ]
    for leaf in leaves:
        expected = eqx.is_array(leaf)
        assert isinstance(leaf, _eqx_private.EQX_ARRAY_TYPES) == expected, leaf
        assert is_array(leaf) == expected, leaf


def test_none_callables_and_static_leaves_in_fields():
    layer = WithCallable(weight=jnp.ones(3), activation=jax.nn.relu)
    other = WithCallable(weight=jnp.ones(3), activation=jnp.tanh)
    runs = run_both(
        counting(lambda m, x, bias=None: m.activation(m.weight * x) + (bias or 0)),
        [
            lambda f: f(layer, jnp.array(-1.0)),
            lambda f: f(layer, jnp.array(2.0)),
            lambda f: f(other, jnp.array(2.0)),
            lambda f: f(layer, jnp.array(3.0), None),
            lambda f: f(layer, jnp.array(3.0), bias=None),
        ],
    )
    assert runs["af"].traces == [1, 1, 2, 3, 3]


def test_kwargs_bind_to_positions_as_in_eqx():
    def fn(x, y=2.0, *, scale=1.0, **extra):
        return x * y * scale, sorted(extra)

    runs = run_both(
        counting(fn),
        [
            lambda f: f(jnp.ones(2)),
            lambda f: f(jnp.ones(2), 3.0),
            lambda f: f(jnp.ones(2), y=3.0),  # binds like the call above: no retrace
            lambda f: f(x=jnp.ones(2), y=3.0),
            lambda f: f(jnp.ones(2), scale=jnp.ones(())),
            lambda f: f(jnp.ones(2), scale=jnp.ones(()), tag="t"),
        ],
    )
    assert runs["af"].traces == [1, 2, 2, 2, 3, 4]


def test_var_positional_arguments():
    run_both(
        counting(lambda *xs: sum(xs)),
        [lambda f: f(jnp.ones(2)), lambda f: f(jnp.ones(2), 1, 2), lambda f: f()],
    )


def test_outputs_with_non_array_leaves_are_the_objects_the_trace_returned():
    marker = object()

    def fn(x):
        return {"value": x + 1, "name": "out", "same": marker}, None

    run_both(counting(fn), [lambda f: f(jnp.ones(2)), lambda f: f(jnp.zeros(2))])
    for jit in JITS.values():
        f = jit(lambda x: (x + 1, object()))
        first, second = f(jnp.ones(2)), f(jnp.zeros(2))
        assert first[1] is second[1]  # made once, while tracing


def test_outputs_keep_static_fields_and_numpy_constants():
    def fn(scene):
        return dataclasses.replace(scene, label="out"), np.arange(3), 7

    runs = run_both(counting(fn), [lambda f: f(make_scene(2))])
    out = runs["af"].outputs[0]
    assert out[0].label == "out" and isinstance(out[1], jax.Array) and out[2] == 7


def test_function_that_is_a_module_with_arrays():
    class Affine(eqx.Module):
        w: jax.Array
        b: float

        def __call__(self, x):
            return self.w * x + self.b

    affine = Affine(jnp.arange(3.0), 0.5)
    wrappers = [jit(affine) for jit in JITS.values()]
    for f in wrappers:
        assert_same(f(jnp.ones(3)), affine(jnp.ones(3)))
    # The wrappers are pytrees with the same leaves (the function's arrays).
    assert_same(jtu.tree_leaves(wrappers[0]), jtu.tree_leaves(wrappers[1]))


def test_methods_bind_through_get():
    class Model(af.ArrayModule):
        scale: Float[Array, ""]

        @af.filter_jit
        def af_apply(self, x):
            return self.scale * x

        @eqx.filter_jit
        def eqx_apply(self, x):
            return self.scale * x

    model = Model(scale=2.0)
    assert_same(model.af_apply(jnp.ones(2)), model.eqx_apply(jnp.ones(2)))
    assert_same(Model.af_apply(model, 3.0), Model.eqx_apply(model, 3.0))
    assert isinstance(model.af_apply, eqx.Partial)


def test_method_called_on_new_instances_traces_once():
    counts = {}

    class Model(af.ArrayModule):
        scale: Float[Array, ""]

        @af.filter_jit
        def apply(self, x):
            counts["af"] = counts.get("af", 0) + 1
            return self.scale * x

    for i in range(5):
        Model(scale=float(i)).apply(jnp.ones(2))
    assert counts == {"af": 1}


def test_bound_method_of_a_plain_object_is_static():
    class Holder:
        def __init__(self, k):
            self.k = k

        def apply(self, x):
            return x * self.k

    holder = Holder(3.0)
    outs = [jit(holder.apply)(jnp.ones(2)) for jit in JITS.values()]
    assert_same(outs[0], outs[1])


@pytest.mark.parametrize(
    "donate", ["all", "all-except-first", "warn", "warn-except-first", "none"]
)
def test_donation_deletes_the_same_buffers(donate):
    results = {}
    for name, jit in JITS.items():
        f = jit(lambda a, b, c=None: (a + 1, b * 2), donate=donate)
        a, b, c = jnp.ones(3), jnp.ones(3), jnp.ones(2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = f(a, b, c=c)
        results[name] = (
            out,
            [a.is_deleted(), b.is_deleted(), c.is_deleted()],
            sorted({str(w.message).split(":")[0] for w in caught}),
        )
    assert_same(results["af"][0], results["eqx"][0])
    assert results["af"][1:] == results["eqx"][1:]


@pytest.mark.parametrize("donate", ["all", "all-except-first", "none"])
def test_donation_with_static_leaves_among_the_arrays(donate):
    # Static leaves are not passed to jax.jit, so the split between the first
    # argument's leaves and the rest must count only the traced ones.
    results = {}
    for name, jit in JITS.items():
        f = jit(lambda a, b: (a[0] * a[1] + a[2], b[0] + b[1]), donate=donate)
        a = (jnp.ones(3), 2, jnp.ones(3))
        b = (3, jnp.ones(3))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = f(a, b)
        results[name] = (out, [a[0].is_deleted(), a[2].is_deleted(), b[1].is_deleted()])
    assert_same(results["af"][0], results["eqx"][0])
    assert results["af"][1] == results["eqx"][1]


def test_same_function_with_two_donation_layouts_traces_like_eqx():
    counter_af: list[int] = []
    counter_eqx: list[int] = []
    traces = {}
    for name, jit, counter in (
        ("af", af.filter_jit, counter_af),
        ("eqx", eqx.filter_jit, counter_eqx),
    ):

        def fn(x, counter=counter):
            counter.append(1)
            return x + 1

        for donate in ("none", "all", "warn", "none"):
            jit(fn, donate=donate)(jnp.ones(3))
        jit(fn)(jnp.ones(3))  # a second wrapper around the same function
        traces[name] = len(counter)
    assert traces["af"] == traces["eqx"] == 2


def test_invalid_donate_option_raises_equinox_error():
    with pytest.raises(ValueError, match="donate"):
        af.filter_jit(lambda x: x, donate="some")  # type: ignore[arg-type]


def test_error_if_surfaces_at_the_call_as_equinox_runtime_error():
    messages = {}
    for name, jit in JITS.items():

        @jit
        def check(x):
            return eqx.error_if(x, x > 0, "x must not be positive")

        check(jnp.array(-1.0))
        with pytest.raises(eqx.EquinoxRuntimeError) as info:
            check(jnp.array(1.0))
        messages[name] = str(info.value)
    for message in messages.values():
        assert "x must not be positive" in message
        assert "in check" in message  # the user's frame inside the jit
        # No frame of arrayfield's own code (the path of a checkout may say
        # "arrayfield" too: pytest's frames above the call are in the stack).
        assert os.path.dirname(af.__file__) not in message


def test_call_that_does_not_bind_raises_the_same_type_error():
    errors = {}
    for name, jit in JITS.items():
        f = jit(lambda x, y: x + y)
        with pytest.raises(TypeError) as info:
            f(jnp.ones(2))
        errors[name] = str(info.value)
    assert errors["af"] == errors["eqx"]


def test_unhashable_static_leaf_fails_as_in_eqx():
    errors = {}
    for name, jit in JITS.items():
        f = jit(lambda x, s: x)
        with pytest.raises(Exception) as info:  # whatever equinox raises
            f(jnp.ones(2), UnhashableStatic())
        errors[name] = (type(info.value), str(info.value).splitlines()[-1])
    assert errors["af"] == errors["eqx"]


class UnhashableStatic:
    __hash__ = None  # type: ignore[assignment]


def test_grad_and_vmap_inside_and_around():
    def loss(params, x):
        per_example = jax.vmap(lambda xi: jnp.sum(params.w * xi) ** 2)(x)
        return jnp.mean(per_example)

    class Params(af.ArrayModule):
        w: Float[Array, "3"]

    params, x = Params(w=jnp.arange(3.0)), jnp.ones((4, 3))
    run_both(
        counting(lambda p, x: jax.value_and_grad(loss)(p, x)),
        [lambda f: f(params, x), lambda f: f(params, x * 2)],
    )
    run_both(
        counting(loss),
        [
            lambda f: jax.grad(f)(params, x),
            lambda f: jax.vmap(f, in_axes=(None, 0))(params, x[:, None]),
            lambda f: jax.jit(f)(params, x),
        ],
    )


def test_nested_filter_jit_calls():
    inner = {name: jit(lambda x, k: x * k) for name, jit in JITS.items()}
    run_both(
        counting(lambda x, name: inner[name](x, 2) + 1),
        [lambda f, n=n: f(jnp.ones(2), n) for n in ("af", "af")],
    )


def test_lower_compiles_as_in_eqx():
    for jit in JITS.values():
        f = jit(lambda x, k: x * k)
        compiled = f.lower(jnp.ones(3), 2).compile()
        assert_same(compiled(jnp.ones(3), 2), jnp.ones(3) * 2)
        assert "multiply" in f.lower(jnp.ones(3), 2).as_text()


def test_extra_jit_options_go_to_eqx_filter_jit():
    run_both(counting(lambda x: x + 1), [lambda f: f(jnp.ones(2))], keep_unused=True)


def test_clear_caches_retraces_new_wrappers_only_as_in_eqx():
    runs = {}
    for name, jit in JITS.items():
        counter: list[int] = []
        fn = counting(lambda x: x + 1)(counter)
        f = jit(fn)
        f(jnp.ones(2))
        jit(fn)(jnp.ones(2))  # a second wrapper shares the first one's trace
        eqx.clear_caches()
        f(jnp.ones(2))  # keeps its trace
        jit(fn)(jnp.ones(2))  # a new wrapper after clearing traces again
        runs[name] = len(counter)
    assert runs["af"] == runs["eqx"] == 2


def test_jax_clear_caches_retraces_once_as_in_eqx():
    # af.filter_jit traces the function in an inner jax.jit: clearing JAX's caches
    # must not make it trace twice (outer and inner) or not at all.
    run_both(
        counting(lambda x: x * 2),
        [
            lambda f: f(jnp.ones(2)),
            lambda f: (jax.clear_caches(), f(jnp.ones(2)))[1],
            lambda f: f(jnp.ones(2)),
        ],
    )


def test_wrapper_reports_the_function_it_wraps():
    def step(scene, x):
        """Doc."""
        return scene

    wrapped = af.filter_jit(step)
    assert wrapped.__wrapped__ is step
    assert wrapped.__name__ == "step" and wrapped.__doc__ == "Doc."
    assert repr(wrapped) == f"af.filter_jit({step.__qualname__})"


def test_decorator_with_and_without_arguments():
    @af.filter_jit
    def a(x):
        return x + 1

    @af.filter_jit(donate="none")
    def b(x):
        return x + 1

    assert_same(a(jnp.ones(2)), b(jnp.ones(2)))


def test_hooks_still_find_what_filter_jit_reads():
    # On every supported pair dispatch stands on its own (no fallback): each
    # problem names what moved in equinox or JAX.
    assert _eqx_private.MOVED == [] and _jax_private.MOVED == []
    assert _eqx_private.dispatch_problem() is None
    assert _jax_private.dispatch_problem() is None


def test_equinox_wrapper_made_only_for_the_calls_handed_to_it(monkeypatch):
    made = []
    real = _jit._equinox_filter_jit

    def counted(*args, **kwargs):
        made.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(_jit, "_equinox_filter_jit", counted)

    class Affine(eqx.Module):
        w: jax.Array

        def __call__(self, x, options):
            return self.w * x

    step = af.filter_jit(Affine(jnp.arange(3.0)))
    x = jnp.ones(3)
    assert_same(step(x, "a"), jnp.arange(3.0))
    assert made == []  # split and named with public calls: no equinox wrapper

    class Unhashable:
        __hash__ = None  # pyright: ignore[reportAssignmentType]

    with pytest.raises(ValueError):  # an unhashable static leaf: equinox's error
        step(x, Unhashable())
    assert made == [{"donate": "none"}]
    # A copy with other arrays hands its calls over with its own arrays.
    doubled = jtu.tree_map(lambda v: v * 2 if eqx.is_array(v) else v, step)
    assert_same(doubled.lower(x, "a").compile()(x, "a"), 2 * jnp.arange(3.0))
    assert_same(doubled(x, "a"), 2 * jnp.arange(3.0))
    assert len(made) == 2
    af.filter_jit(lambda v: v, donate="all", inline=True)  # every call is equinox's
    assert made[-1] == {"donate": "all", "inline": True}


# -- the loops -----------------------------------------------------------------------


class SeedScene(af.ArrayModule):
    x: np.array

    def __init__(self):
        self.x = 0


def test_seed_loop_traces_once_over_3000_steps():
    traces = []

    @af.filter_jit
    def step(scene, x):
        traces.append(1)
        return jtu.tree_map(lambda s: s + x, scene)

    scene = SeedScene()
    for _ in range(3000):
        scene = step(scene, 1)
    assert len(traces) == 1
    assert int(scene.x) == 3000


def test_optax_loop_traces_once_and_matches_eqx():
    class Line(af.ArrayModule):
        slope: Float[Array, ""]
        intercept: Float[Array, ""]

    xs = jnp.linspace(0.0, 1.0, 16)
    ys = 3.0 * xs - 1.0
    optimiser = optax.adam(0.1)

    def make(counter):
        def step(model, opt_state, xs, ys):
            counter.append(1)

            def loss(m):
                return jnp.mean((m.slope * xs + m.intercept - ys) ** 2)

            value, grads = jax.value_and_grad(loss)(model)
            updates, opt_state = optimiser.update(grads, opt_state, model)
            return eqx.apply_updates(model, updates), opt_state, value

        return step

    def fit(f):
        model = Line(slope=0.0, intercept=0.0)
        opt_state = optimiser.init(model)
        for _ in range(50):
            model, opt_state, value = f(model, opt_state, xs, ys)
        return model, opt_state, value

    runs = run_both(make, [fit])
    assert runs["af"].traces == [1]


# -- generated trees ---------------------------------------------------------------

# A recipe is plain data hypothesis can shrink: nested lists/tuples/dicts of leaves,
# each a ("jax" | "numpy" | "int" | "float" | "str" | "none", shape) pair.
leaf_recipes = st.tuples(
    st.sampled_from(["jax", "numpy", "npscalar", "int", "float", "str", "none"]),
    st.sampled_from([(), (2,), (1, 3)]),
)
tree_recipes = st.recursive(
    leaf_recipes,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.tuples(children, children),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), children, max_size=3),
        children.map(lambda c: ("module", c)),
    ),
    max_leaves=8,
)


@dataclasses.dataclass
class Box:
    """Materialises a recipe; `seed` varies the values (not the structure)."""

    seed: int

    def build(self, recipe: Any) -> Any:
        if (
            isinstance(recipe, tuple)
            and len(recipe) == 2
            and isinstance(recipe[0], str)
        ):
            kind, arg = recipe
            if kind == "module":
                return Holder(value=self.build(arg), tag="t")
            return self.leaf(kind, arg)
        if isinstance(recipe, list):
            return [self.build(r) for r in recipe]
        if isinstance(recipe, tuple):
            return tuple(self.build(r) for r in recipe)
        return {k: self.build(v) for k, v in recipe.items()}

    def leaf(self, kind: str, shape: tuple[int, ...]) -> Any:
        values = np.full(shape, self.seed + 0.5, np.float32)
        return {
            "jax": lambda: jnp.asarray(values),
            "numpy": lambda: values,
            "npscalar": lambda: np.float32(self.seed),
            "int": lambda: self.seed % 2,
            "float": lambda: 1.5,
            "str": lambda: "s",
            "none": lambda: None,
        }[kind]()


class Holder(eqx.Module):
    value: Any
    tag: str = eqx.field(static=True)


def double_arrays(tree: Any) -> Any:
    return jtu.tree_map(lambda x: x * 2 if eqx.is_array(x) else x, tree)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(recipe=tree_recipes, seeds=st.lists(st.integers(0, 2), min_size=1, max_size=3))
def test_generated_trees_match_eqx_output_and_trace_counts(recipe, seeds):
    run_both(
        counting(lambda tree, k: (double_arrays(tree), k)),
        [lambda f, s=s: f(Box(s).build(recipe), k=s) for s in seeds],
    )


# -- explain_retraces --------------------------------------------------------------


def retrace_messages(jit: Callable[..., Any], mode: str) -> list[str]:
    class Src(eqx.Module):
        flux: float
        size: jax.Array

    def scale(scene, factor):
        return jtu.tree_map(lambda x: x * factor, scene)

    def calls(f):
        f(Src(1.0, jnp.ones(2)), 2.0)
        f(Src(2.0, jnp.ones(2)), 2.0)
        f(Src(2.0, jnp.ones(2)), 2)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if mode == "decorator":
            calls(af.explain_retraces(jit(scale)))
        elif mode == "with":
            f = jit(scale)
            with af.explain_retraces():
                calls(f)
        else:  # around the plain function the jit traces
            calls(jit(af.explain_retraces(scale)))
    return [str(w.message) for w in caught]


@pytest.mark.parametrize("options", [{}, {"keep_unused": True}])  # fast, fallback
@pytest.mark.parametrize("mode", ["decorator", "with", "inner"])
def test_explain_retraces_reports_af_filter_jit_as_eqx_filter_jit(mode, options):
    def af_jit(fn):
        return af.filter_jit(fn, **options)

    def eqx_jit(fn):
        return eqx.filter_jit(fn, **options)

    af_messages = retrace_messages(af_jit, mode)
    eqx_messages = retrace_messages(eqx_jit, mode)
    # The same causes; where af.filter_jit's trace was a program compiled before
    # (flux is computed in Python: the program is the same), it says so.
    shared = (
        "was traced again, but compiled nothing: the trace is a program compiled "
        "before (af.filter_jit ran that executable, or JAX read it from its "
        "persistent cache), so the cost was the trace alone."
    )
    said_shared = [shared in m for m in af_messages]
    # ... and its reasons say what the change cost there: a trace.
    normal = [
        m.replace(shared, "was traced and compiled again.").replace(
            "traces again", "compiles again"
        )
        if shared in m
        else m
        for m in af_messages
    ]
    assert not any(
        "compiles again" in m
        for m, was_shared in zip(af_messages, said_shared, strict=True)
        if was_shared
    )
    assert normal == eqx_messages
    assert "scene.flux: 1.0 -> 2.0" in af_messages[0]
    sharing = not options and mode != "inner" and _jax_private.sharing_problem() is None
    assert said_shared[0] == sharing
    assert not any(said_shared[1:])  # 2.0 -> 2: another program, compiled


def test_explain_retraces_environment_switch_watches_af_filter_jit():
    script = (
        "import warnings, jax.numpy as jnp, arrayfield as af\n"
        "warnings.simplefilter('always')\n"
        "f = af.filter_jit(lambda x, k: x * k)\n"
        "f(jnp.ones(2), 2.0)\n"
        "f(jnp.ones(2), 3.0)\n"
    )
    result = run_code(script, env={"ARRAYFIELD_EXPLAIN_RETRACES": "1"}, check=True)
    assert "k: 2.0 -> 3.0" in result.stderr


def test_import_arrayfield_leaves_filter_jit_unloaded_until_used():
    script = (
        "import sys, warnings, jax.numpy as jnp, arrayfield as af\n"
        "assert 'arrayfield._jit' not in sys.modules\n"
        "warnings.simplefilter('always')\n"
        "with af.explain_retraces():  # hooks af.filter_jit's class as it loads\n"
        "    f = af.filter_jit(lambda x, k: x * k)\n"
        "    f(jnp.ones(2), 2.0)\n"
        "    f(jnp.ones(2), 3.0)\n"
    )
    result = run_code(script, env={"ARRAYFIELD_EXPLAIN_RETRACES": None}, check=True)
    assert "k: 2.0 -> 3.0" in result.stderr


def test_debug_print_output_appears_before_the_call_returns(capfd):
    # Programs that call back into Python wait for the device, as eqx.filter_jit.
    for jit in JITS.values():

        @jit
        def show(x):
            jax.debug.print("value {}", x)
            return x + 1

        for value in (1.0, 2.0):
            show(jnp.array(value))
            assert f"value {value}" in capfd.readouterr().out


def test_error_if_after_a_clean_first_trace_inside_another_jit():
    for jit in JITS.values():
        check = jit(lambda x: eqx.error_if(x, x > 0, "positive"))
        jax.jit(lambda x, check=check: check(x))(jnp.array(-1.0))  # traced in a jit
        with pytest.raises(eqx.EquinoxRuntimeError, match="positive"):
            check(jnp.array(1.0))


def test_disable_jit_runs_the_function_once_per_call_as_in_eqx():
    runs = {}
    for name, jit in JITS.items():
        calls: list[int] = []
        f = jit(counting(lambda x: x + 1)(calls))
        with jax.disable_jit():
            f(jnp.ones(2))
            f(jnp.ones(2))
        runs[name] = len(calls)
    assert runs["af"] == runs["eqx"]


def test_grad_of_a_filter_jit_function_then_plain_calls():
    run_both(
        counting(lambda x: jnp.sum(jnp.sin(x))),
        [
            lambda f: jax.grad(f)(jnp.ones(3)),
            lambda f: f(jnp.ones(3)),
            lambda f: jax.grad(f)(jnp.zeros(3)),
        ],
    )


@pytest.mark.parametrize("jit_name", ["af", "eqx"])
def test_decorated_function_in_a_with_block_warns_once_per_retrace(jit_name):
    f = af.explain_retraces(JITS[jit_name](lambda x, k: x * k))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            f(jnp.ones(2), 2.0)
            f(jnp.ones(2), 3.0)
    assert len(caught) == 1
    assert "k: 2.0 -> 3.0" in str(caught[0].message)


@pytest.mark.parametrize("donate", ["none", "all"])
def test_calls_whose_program_calls_back_return_finished_results(donate):
    # eqx.filter_jit waits for every call; af.filter_jit waits whenever a program
    # calls back into Python (here eqx.error_if) or donates, so results are ready.
    def heavy(m):
        out = jnp.linalg.matrix_power(m, 64)
        return eqx.error_if(out, jnp.any(jnp.isnan(out)), "nan")

    for jit in JITS.values():
        f = jit(heavy, donate=donate)
        for _ in range(3):
            out = f(jnp.eye(256) * 0.5)
            assert out.is_ready()


@pytest.mark.parametrize("transform", ["grad", "vmap"])
def test_error_if_under_an_eager_transformation_raises_at_the_call(transform):
    # The program is traced under the transformation (its outputs are tracers);
    # the error must still come from the call, as with eqx.filter_jit.
    def loss(x):
        return jnp.sum(eqx.error_if(x, x > 1, "too big") ** 2)

    for jit in JITS.values():
        f = jit(loss)
        if transform == "grad":
            call, good, bad = jax.grad(f), jnp.zeros(3), jnp.full(3, 5.0)
        else:
            call, good, bad = jax.vmap(f), jnp.zeros((2, 3)), jnp.full((2, 3), 5.0)
        call(good)
        with pytest.raises(eqx.EquinoxRuntimeError, match="too big"):
            call(bad)


def test_equinox_filter_jit_pointed_at_af_filter_jit():
    # A program may replace eqx.filter_jit wholesale (compat/swap_filter_jit.py
    # does, to run equinox's own tests); af.filter_jit must still reach equinox's.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(eqx, "filter_jit", af.filter_jit)
        step = eqx.filter_jit(lambda x, n: x * n)
        assert step(jnp.ones(2), 3).tolist() == [3.0, 3.0]


# -- found in review -----------------------------------------------------------------


def test_a_wrapper_rebuilt_each_step_traces_an_outer_jit_as_often_as_eqx():
    def g(x):
        return x + 1

    counts = {}
    for inner in (eqx.filter_jit, af.filter_jit):
        traces = 0

        @eqx.filter_jit
        def outer(fn, x):
            nonlocal traces
            traces += 1
            return fn(x)

        for _ in range(3):
            outer(inner(g), jnp.ones(2))  # a new wrapper of the same function
        counts[inner.__module__] = traces
    assert counts == {"equinox._jit": 1, "arrayfield._jit": 1}


def _callback_failures(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "jax._src.callback"]


def test_callback_failures_outside_filter_jit_calls_are_still_logged(caplog):
    # The log filter af.filter_jit installs acts only while its calls run.
    af.filter_jit(lambda x: x)(jnp.ones(1))
    checked = jax.jit(lambda x: eqx.error_if(x, x > 1, "too big"))
    # Its message is equinox's business (its next release words it otherwise
    # outside eqx.filter_jit); the log line is what is checked.
    with pytest.raises(Exception):  # noqa: B017
        jax.block_until_ready(checked(jnp.full(3, 5.0)))
    assert _callback_failures(caplog) == ["jax.pure_callback failed"]


def test_each_program_decides_for_itself_whether_calls_wait(caplog):
    # One call structure, two programs (shapes are jax.jit's business): the (3,)
    # program checks its input, the (2,) one does not. The check's error must
    # surface at the call that fails, however the two were traced, and without
    # JAX's own log line, as with eqx.filter_jit.
    @af.filter_jit
    def g(x):
        if x.shape == (3,):
            x = eqx.error_if(x, x > 1, "too big")
        return x + 1

    g(jnp.ones(2))  # no callback: returns once dispatched
    with pytest.raises(eqx.EquinoxRuntimeError, match="too big"):
        g(jnp.full(3, 5.0))  # traces the checking program and fails at once
    with pytest.raises(eqx.EquinoxRuntimeError, match="too big"):
        g(jnp.full(3, 6.0))  # the cached program
    assert g(jnp.ones(2)).tolist() == [2.0, 2.0]
    assert _callback_failures(caplog) == []
    assert _jit._in_flight == []  # no call is left counted as in progress


def test_a_program_traced_in_another_thread_still_raises_at_its_calls(caplog):
    entered, go = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    @af.filter_jit
    def g(x):
        if x.shape == (3,):
            entered.set()
            go.wait(10)
            x = eqx.error_if(x, x > 1, "too big")
        return x + 1

    def fail_in_thread() -> None:
        try:
            g(jnp.full(3, 5.0))
        except eqx.EquinoxRuntimeError as error:
            errors.append(error)

    g(jnp.ones(2))
    thread = threading.Thread(target=fail_in_thread)
    thread.start()
    assert entered.wait(10)  # the thread is tracing the (3,) program
    g(jnp.ones(2))  # a cache hit meanwhile, in this thread
    go.set()
    thread.join()
    assert len(errors) == 1 and "too big" in str(errors[0])
    with pytest.raises(eqx.EquinoxRuntimeError, match="too big"):
        g(jnp.full(3, 5.0))  # and in this thread, from the cache
    assert _callback_failures(caplog) == []
    assert _jit._in_flight == []


def test_only_programs_that_call_back_return_a_marker():
    # The marker is an extra output buffer; programs without host work skip it.
    def plain(x):
        return x * 2

    def printing(x):
        jax.debug.print("x={x}", x=x)
        return x * 2

    for fn, wanted in ((plain, []), (printing, [True])):
        f = af.filter_jit(fn)
        f(jnp.ones(2))
        # A plain function holds no arrays: its programs take the leaves alone.
        assert f._plan.layout.fun_at is None
        markers = []
        for compiled in f._plan.layout.jits.values():
            result = compiled.jitted([jnp.ones(2)])
            # Without a marker a program returns its output alone.
            marker = result.parts[0] if type(result) is _program.Marked else None
            markers += [] if marker is None else [bool(_program.concrete(marker))]
        assert markers == wanted


@pytest.mark.parametrize("donate", ["all", "warn", "all-except-first"])
@pytest.mark.parametrize("holder", ["module", "partial", "method"])
def test_donation_consumes_the_same_buffers_when_the_function_holds_arrays(
    donate, holder
):
    # JAX gives an output the first donated buffer that fits, so the order of the
    # donated buffers (equinox's: first argument, function, rest) decides which
    # input is consumed: the argument, not the model's weights.
    class Model(eqx.Module):
        w: jax.Array

        def __call__(self, x):
            return x * self.w

    results = {}
    for name, jit in JITS.items():
        model = Model(jnp.ones(3))
        fn = {
            "module": model,
            "partial": jtu.Partial(lambda w, x: x * w, model.w),
            "method": model.__call__,
        }[holder]
        x = jnp.full(3, 2.0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            step = jit(fn, donate=donate)
            out = step(x)
            deleted = [x.is_deleted(), model.w.is_deleted()]
            try:  # works only if the weights were not consumed
                again: Any = step(jnp.ones(3))
            except RuntimeError as error:
                again = type(error)
        results[name] = (out, deleted, again)
    assert_same(results["af"][0], results["eqx"][0])
    assert results["af"][1] == results["eqx"][1]
    if isinstance(results["eqx"][2], type):
        assert results["af"][2] is results["eqx"][2]
    else:
        assert_same(results["af"][2], results["eqx"][2])


def test_a_call_racing_the_trace_that_finds_a_callback_logs_nothing(caplog):
    # Thread A traces a checking program and is held inside the trace; thread B
    # calls meanwhile (and traces too). Both calls began before anyone knew the
    # program calls back; neither may let JAX log the failed callback.
    entered, go = threading.Event(), threading.Event()
    traces = []
    errors: list[BaseException] = []

    @af.filter_jit
    def g(x):
        traces.append(1)
        if len(traces) == 1:
            entered.set()
            go.wait(10)
        return eqx.error_if(x, x > 1, "too big")

    def call() -> None:
        try:
            g(jnp.full(3, 5.0))
        except eqx.EquinoxRuntimeError as error:
            errors.append(error)

    first = threading.Thread(target=call)
    first.start()
    assert entered.wait(10)
    second = threading.Thread(target=call)
    second.start()
    time.sleep(0.5)  # to reach its call, where it waits for the first one's trace
    go.set()
    first.join(30)
    second.join(30)
    assert len(errors) == 2
    assert _callback_failures(caplog) == []
    assert _jit._in_flight == []


def test_a_static_leaf_whose_hash_calls_another_filter_jit_function():
    # The key lookup runs a static leaf's __hash__ and __eq__ (user code) under the
    # lock that guards compiling; a new program compiled from there must not wait
    # on that lock forever.
    calls = itertools.count()

    @af.filter_jit
    def helper(x, n):
        return x + n

    class Key:
        def __hash__(self):
            helper(jnp.ones(1), next(calls))  # a new static value: compiles
            return 1

        def __eq__(self, other):
            return isinstance(other, Key)

    @af.filter_jit
    def f(x, key):
        return x * 2

    done = []
    thread = threading.Thread(
        target=lambda: done.append(f(jnp.ones(2), Key())), daemon=True
    )
    thread.start()
    thread.join(60)
    assert done and done[0].tolist() == [2.0, 2.0]


def test_trace_errors_name_the_users_function():
    def branches_on_a_value(x):
        return x if x.sum() > 0 else -x

    for jit in JITS.values():
        with pytest.raises(jax.errors.TracerBoolConversionError) as info:
            jit(branches_on_a_value)(jnp.ones(3))
        assert "function branches_on_a_value at" in str(info.value)


def test_a_static_leaf_whose_eq_raises_gives_a_value_error_as_in_eqx():
    class Uncomparable:
        def __hash__(self):
            return 1

        def __eq__(self, other):
            raise RuntimeError("cannot compare")

    for jit in JITS.values():
        f = jit(lambda x, s: x)
        f(jnp.ones(2), Uncomparable())  # nothing to compare with yet
        with pytest.raises(ValueError):
            f(jnp.ones(2), Uncomparable())


def test_a_call_with_keywords_never_shares_a_program_with_positional_lookalikes():
    # Calls without keywords are keyed by their positional arguments alone. The
    # keyword call below binds to `((x,), {"k": y})`, exactly the positional
    # arguments of the first call: each must still run its own program.
    def g(a, b=None, *, k=None):
        if k is None:
            return a[0] * 10.0 + b["k"]
        return a * 100.0 + k

    x, y = jnp.array(1.0), jnp.array(2.0)
    for first_positional in (True, False):
        ours, theirs = af.filter_jit(g), eqx.filter_jit(g)
        calls = [lambda f: f((x,), {"k": y}), lambda f: f(x, k=y)]
        if not first_positional:
            calls.reverse()
        for call in calls:
            assert float(call(ours)) == float(call(theirs))
        assert float(ours((x,), {"k": y})) == 12.0
        assert float(ours(x, k=y)) == 102.0
