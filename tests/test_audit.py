import dataclasses
import functools
import re
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
from arrayfield._spec import field_spec, resolve_annotation
from arrayfield.diagnostics import _annotations
from helpers import run_cli, script_module

# What af.filter_jit shares, where it shares callables at all (equinox >= 0.13 and
# jax.jit's parts readable); elsewhere the audit's af.filter_jit column equals
# eqx.filter_jit's, which the agreement tests check on every version.
needs_sharing = pytest.mark.skipif(
    _jax_private.sharing_problem() is not None,
    reason="callable sharing needs equinox >= 0.13 and jax.jit's parts readable",
)


class Morph(eqx.Module):
    size: Float[Array, ""]
    profile: object


class Source(eqx.Module):
    morph: Morph
    flux: float
    name: str


class Scene(eqx.Module):
    sources: list
    mask: jnp.ndarray = eqx.field(static=True)


class CleanSource(af.ArrayModule):
    size: Float[Array, ""]
    flux: Float[Array, ""]


def _hazardous_scene() -> Scene:
    with pytest.warns(UserWarning, match="static"):
        return Scene(
            sources=[
                Source(Morph(jnp.asarray(1.0), jax.nn.relu), 2.0, "a"),
                Source(Morph(3, functools.partial(max, 1)), np.float32(1), "b"),
            ],
            mask=jnp.ones(2),
        )


def test_each_hazard_in_a_nested_scene_is_found_with_its_path_and_kind():
    findings = af.audit(_hazardous_scene(), name="scene")
    assert [(f.path, f.kind) for f in findings] == [
        ("scene.sources[0].flux", "python-scalar"),
        ("scene.sources[1].morph.size", "python-scalar"),
        ("scene.sources[1].flux", "numpy-scalar"),
        ("scene.sources[0].name", "hashed-leaf"),
        ("scene.sources[1].morph.profile", "hashed-leaf"),
        ("scene.sources[1].name", "hashed-leaf"),
        ("scene.sources[0].morph.size", "weak-type"),
        ("scene.mask", "static-array"),
    ]


def test_scalar_hints_depend_on_the_field_annotation():
    by_path = {f.path: f for f in af.audit(_hazardous_scene(), name="scene")}
    array_field = by_path["scene.sources[1].morph.size"]
    assert array_field.value == 3
    assert "Morph.size is annotated Float[Array, ''] but holds a Python number" in (
        array_field.hint
    )
    assert "subclass af.ArrayModule" in array_field.hint
    float_field = by_path["scene.sources[0].flux"].hint
    assert 'Source.flux is annotated float: annotate it Float[Array, ""]' in float_field
    assert "eqx.field(static=True)" in float_field
    assert "Scene.mask is static=True but holds an array" in by_path["scene.mask"].hint


def test_module_level_functions_are_stable_and_not_reported():
    paths = [f.path for f in af.audit(_hazardous_scene(), name="scene")]
    assert "scene.sources[0].morph.profile" not in paths  # jax.nn.relu


def test_report_groups_by_kind_one_line_per_finding():
    report = str(af.audit(_hazardous_scene(), name="scene"))
    lines = report.splitlines()
    assert lines[0] == "af.audit: 8 recompile hazards in scene"
    assert lines[1].startswith("python-scalar (2): Python scalars in traced positions")
    assert lines[2].startswith("  scene.sources[0].flux = 2.0: ")
    assert "  scene.sources[0].morph.size = weak f32[]: " in report
    headings = [line.split(" (")[0] for line in lines if not line.startswith(" ")]
    assert headings[1:] == [
        "python-scalar",
        "numpy-scalar",
        "hashed-leaf",
        "weak-type",
        "static-array",
    ]


def test_clean_tree_of_array_modules_and_optax_state_prints_clean():
    params = {"sources": [CleanSource(size=1, flux=2.0), CleanSource(size=2, flux=1)]}
    opt_state = optax.adam(1e-3).init(params)
    findings = af.audit({"params": params, "opt_state": opt_state}, name="state")
    assert findings == []
    assert str(findings) == "af.audit: state is clean: no recompile hazards found."
    af.assert_clean(opt_state)


def test_optax_state_with_python_count_is_reported_at_its_path():
    state = optax.adam(1e-3).init({"w": jnp.ones(2)})
    state = (state[0]._replace(count=0), *state[1:])
    findings = af.audit(state, name="opt_state")
    assert [(f.path, f.kind) for f in findings] == [
        ("opt_state[0].count", "python-scalar")
    ]


def test_dicts_and_lists_of_python_values():
    findings = af.audit({"lr": 0.1, "ids": ["a"], "fn": lambda x: x}, name="cfg")
    assert [(f.path, f.kind) for f in findings] == [
        ('cfg["lr"]', "python-scalar"),
        ('cfg["fn"]', "hashed-leaf"),
        ('cfg["ids"][0]', "hashed-leaf"),
    ]
    assert "jnp.asarray(x, dtype=...)" in findings[0].hint


def test_assert_clean_raises_an_assertion_error_with_the_report():
    with pytest.raises(af.AuditError) as info:
        af.assert_clean({"step": 1}, name="state")
    assert isinstance(info.value, AssertionError)
    assert str(info.value).startswith("af.audit: 1 recompile hazard in state\n")
    assert 'state["step"] = 1' in str(info.value)


def test_audit_does_not_change_the_tree():
    scene = _hazardous_scene()
    before = jax.tree_util.tree_structure(scene)
    af.audit(scene)
    assert jax.tree_util.tree_structure(scene) == before


# -- what one snapshot cannot call a hazard -------------------------------------------


def test_stock_mlp_audits_clean_and_passes_assert_clean():
    # Its activations are jax.nn.relu and equinox's module-level `lambda x: x`.
    mlp = eqx.nn.MLP(2, 1, 8, 2, key=jax.random.key(0))
    assert af.audit(mlp, name="mlp") == []
    af.assert_clean(mlp)
    af.assert_clean(mlp, eqx.nn.MLP(2, 1, 8, 2, key=jax.random.key(1)))


def test_three_mlps_trace_once_as_the_clean_audit_says():
    traces = []

    @eqx.filter_jit
    def apply(model, x):
        traces.append(None)
        return model(x)

    for seed in range(3):
        apply(eqx.nn.MLP(2, 1, 8, 2, key=jax.random.key(seed)), jnp.ones(2))
    assert len(traces) == 1


_IDENTITY = lambda x: x  # noqa: E731  (a module-level lambda, as equinox's)
OPTIMIZER = optax.adam(1e-3)  # built once, at import: its closures never change


class Layer(eqx.Module):
    w: jnp.ndarray
    act: object = _IDENTITY
    mode: str = "fast"
    scale: float = 1.0
    gain: Float[Array, ""] = 1.0


def test_module_level_lambdas_and_declared_default_constants_are_not_reported():
    findings = af.audit(Layer(jnp.ones(2)), name="layer")
    # gain's annotation asks for an array: a number there is reported, default or not
    assert [f.path for f in findings] == ["layer.gain"]


def test_values_other_than_the_declared_default_are_reported():
    layer = Layer(jnp.ones(2), act=lambda x: 2 * x, mode="slow", scale=2.0, gain=1.0)
    paths = sorted(f.path for f in af.audit(layer, name="layer"))
    assert paths == ["layer.act", "layer.gain", "layer.mode", "layer.scale"]


def test_an_optimizer_built_at_module_level_is_not_reported_one_built_per_call_is():
    assert af.audit(OPTIMIZER, name="opt") == []
    findings = af.audit(optax.adam(1e-3), name="opt")
    assert [f.path for f in findings] == ["opt.init", "opt.update"]
    assert findings[1].hint.startswith(
        "a closure made by each call of chain is hashed by identity"
    )


def test_an_optimizer_per_call_really_compiles_again_and_a_module_level_one_does_not():
    traces = []

    @eqx.filter_jit
    def update(optimizer, grads, state):
        traces.append(None)
        return optimizer.update(grads, state)

    grads = {"w": jnp.ones(2)}
    state = OPTIMIZER.init(grads)
    for _ in range(2):
        update(OPTIMIZER, grads, state)
    assert len(traces) == 1
    for _ in range(2):
        update(optax.adam(1e-3), grads, state)
    assert len(traces) == 3


def test_a_bound_method_of_a_per_instance_object_is_reported():
    class Helper:
        def step(self, x):
            return x

    (finding,) = af.audit({"step": Helper().step}, name="cfg")
    assert finding.hint.startswith("a method bound to a ")
    assert af.audit({"step": OPTIMIZER.update}, name="cfg") == []


class Star(af.ArrayModule):
    flux: Float[Array, ""]


def test_a_number_put_in_without_init_gets_the_normalize_hint():
    star = eqx.tree_at(lambda s: s.flux, Star(flux=1.0), 5.0)
    (finding,) = af.audit(star, name="star")
    assert finding.kind == "python-scalar"
    assert "af.normalize(tree)" in finding.hint
    assert "convert=False" not in finding.hint
    mapped = jax.tree.map(lambda x: 2.0, Star(flux=1.0))
    (finding,) = af.audit(mapped, name="star")
    assert "came in without __init__" in finding.hint
    assert af.audit(af.normalize(star)) == []


def test_convert_false_field_holding_a_number_says_so():
    class Grid(af.ArrayModule):
        spacing: Float[Array, ""] = af.field(convert=False)

    (finding,) = af.audit(Grid(spacing=0.5), name="grid")
    assert "is af.field(convert=False), so the Python number is stored" in (
        finding.hint
    )


# -- two trees: exactly what compiles again ------------------------------------------


class Wcs:  # compared by identity, as astropy's WCS
    def __init__(self, scale):
        self.scale = scale

    def __repr__(self):
        return f"Wcs({self.scale})"


class Stepper:  # a helper with value equality
    def __init__(self, factor):
        self.factor = factor

    def __eq__(self, other):
        return type(other) is Stepper and other.factor == self.factor

    def __hash__(self):
        return hash(self.factor)

    def step(self, x):
        return self.factor * x


def relative_step(x, factor):
    return factor * x


class Field(eqx.Module):
    image: jnp.ndarray
    step: object
    render: object
    helper: object
    wcs: object
    key: str
    flux: float


def _field(
    *,
    shape=3,
    factor=0.1,
    wcs=None,
    key="scene",
    flux=1.0,
    helper=0.5,
    image=None,
):
    """One field's scene, built as a per-field job builds it: a new partial, a
    new lambda and a new helper every time; a new Wcs unless one is given."""
    return Field(
        image=jnp.ones(shape) if image is None else image,
        step=functools.partial(relative_step, factor=factor),
        render=lambda x: x,
        helper=Stepper(helper).step,
        wcs=Wcs(0.2) if wcs is None else wcs,
        key=key,
        flux=flux,
    )


_WCS = Wcs(0.2)


def test_two_fields_list_each_differing_leaf_with_the_jits_it_recompiles():
    findings = af.audit(_field(), _field(flux=2.0, key="0x7f"), name="field")
    by_path = {f.path: f for f in findings}
    assert list(by_path) == [
        "field.step",
        "field.render",
        "field.helper",
        "field.wcs",
        "field.key",
        "field.flux",
    ]
    assert {p: f.kind for p, f in by_path.items()} == {
        "field.step": "callable",
        "field.render": "callable",
        "field.helper": "callable",
        "field.wcs": "identity",
        "field.key": "value",
        "field.flux": "value",
    }
    # Every one traces again under both jits; only eqx.filter_jit is certain to
    # compile again (af.filter_jit compiles where the trace is a new program).
    assert {f.recompiles for f in findings} == {("eqx.filter_jit",)}
    assert findings.compiling("af.filter_jit") == []
    key = by_path["field.key"]
    assert (key.value, key.other) == ("scene", "0x7f")
    assert key.field.startswith("Field.key (test_audit.py:")
    assert "give Wcs value equality" in by_path["field.wcs"].hint


def test_a_new_shape_compiles_again_under_both_jits():
    findings = af.audit(_field(wcs=_WCS), _field(wcs=_WCS, shape=4), name="f")
    (finding,) = [f for f in findings if f.path == "f.image"]
    assert finding.kind == "structure"
    assert finding.recompiles == ("eqx.filter_jit", "af.filter_jit")
    assert findings.compiling("af.filter_jit") == [finding]


def test_the_two_tree_report_prints_one_line_per_cause():
    report = str(af.audit(_field(), _field(flux=2.0), name="field"))
    lines = report.splitlines()
    assert lines[0] == (
        "af.audit: the other field compiles again: 5 leaves differ for "
        "eqx.filter_jit; 0 certainly for af.filter_jit (a new shape, dtype or "
        "structure); for the others it traces again and compiles only where the "
        "trace is a new program, which audit(tree, other, fn=step) reads"
    )
    line = _this_file_line(Field, "flux: float")
    assert lines[-1] == (
        f"  field.flux (Field.flux at test_audit.py:{line}): 1.0 -> 2.0; fix: "
        "Field.flux is annotated float and its value changes between calls: "
        'annotate it Float[Array, ""], and subclass af.ArrayModule instead of '
        "eqx.Module, so it is stored as an array and traced"
    )
    step = next(x for x in lines if x.startswith("  field.step"))
    assert "functools.partial(function relative_step, factor=0.1) -> " in step


def _this_file_line(cls, text):
    import inspect

    lines, start = inspect.getsourcelines(cls)
    return start + next(i for i, line in enumerate(lines) if text in line)


@needs_sharing
def test_equal_leaves_are_never_reported():
    shared = functools.partial(relative_step, factor=0.1)
    render = _IDENTITY
    helper = Stepper(0.5).step
    a = Field(jnp.ones(3), shared, render, helper, _WCS, "s", 1.0)
    b = Field(jnp.zeros(3), shared, render, helper, _WCS, "s", 1.0)
    assert af.audit(a, b) == []
    # Python compares bound methods by the identity of their objects, so a method
    # of an equal Stepper is a new key for eqx.filter_jit (af.filter_jit shares it).
    c = dataclasses.replace(b, helper=Stepper(0.5).step)
    (finding,) = af.audit(a, c)
    assert finding.recompiles == ("eqx.filter_jit",)
    assert _eqx_traces(a, c) == 2
    assert str(af.audit(a, b, name="field")) == (
        "af.audit: the other field compiles nothing again: every leaf is alike for "
        "eqx.filter_jit and af.filter_jit."
    )
    af.assert_clean(a, b)


def test_structure_differences_count_shape_dtype_weak_type_and_none():
    class Box(eqx.Module):
        origin: jnp.ndarray
        mask: object

    pairs = [
        (Box(jnp.ones(2), None), Box(jnp.ones(3), None), "shape changed"),
        (Box(jnp.ones(2), None), Box(jnp.ones(2, dtype=jnp.int32), None), "dtype"),
        (Box(jnp.ones(2), None), Box(jnp.asarray([1.0, 1.0]), None), None),
        (Box(jnp.asarray(1.0), None), Box(jnp.asarray(1.0, jnp.float32), None), "weak"),
        (Box(jnp.ones(2), None), Box(jnp.ones(2), jnp.ones(2)), "appeared"),
    ]
    for a, b, why in pairs:
        findings = af.audit(a, b, name="box")
        if why is None:
            assert findings == []
            continue
        (finding,) = findings
        assert finding.kind == "structure"
        assert why in finding.why
        assert finding.recompiles == ("eqx.filter_jit", "af.filter_jit")
        assert "<locals>.Box." in finding.field


def test_one_and_one_point_zero_do_not_compile_again_and_are_not_reported():
    # eqx.filter_jit reuses the int trace for the float (explain_retraces warns
    # about that reuse); no new compile happens.
    assert af.audit({"k": 1}, {"k": 1.0}) == []


def _eqx_traces(a, b) -> int:
    traces = []

    @eqx.filter_jit
    def step(tree):
        traces.append(None)
        return 0

    step(a)
    step(b)
    return len(traces)


def test_the_audit_agrees_with_eqx_filter_jit_trace_counts():
    pairs = {
        "all equal": (_field(wcs=_WCS), _field(wcs=_WCS)),
        "flux": (_field(wcs=_WCS), _field(wcs=_WCS, flux=2.0)),
        "shape": (_field(wcs=_WCS), _field(wcs=_WCS, shape=4)),
        "wcs": (_field(), _field()),
        "int vs float": (_field(wcs=_WCS, flux=1), _field(wcs=_WCS, flux=1.0)),
        "weak": (
            _field(wcs=_WCS, image=jnp.asarray(1.0)),
            _field(wcs=_WCS, image=jnp.asarray(1.0, jnp.float32)),
        ),
    }
    shared = ("step", "render", "helper")  # the same objects in both: not compared
    for label, (a, b) in pairs.items():
        b = eqx.tree_at(
            lambda f: [getattr(f, n) for n in shared],
            b,
            [getattr(a, n) for n in shared],
        )
        reported = bool(af.audit(a, b))
        assert reported == (_eqx_traces(a, b) == 2), label


# -- the audit's af.filter_jit column against af.filter_jit itself --------------------


def _closure(value):
    return lambda x: x + value


def _nested(value):
    def outer(x):
        inner = lambda y: y * value  # noqa: E731
        return inner(x)

    return outer


class _Plain:
    def step(self, x):
        return x


class _StaticFn(eqx.Module):
    fn: object = eqx.field(static=True)


def _callable_pairs():
    same = jnp.ones(2)
    step = functools.partial
    return {
        "equal partials": (
            step(relative_step, factor=0.1),
            step(relative_step, factor=0.1),
        ),
        "partials, other argument": (
            step(relative_step, factor=0.1),
            step(relative_step, factor=0.2),
        ),
        "partials, int and float": (
            step(relative_step, factor=1),
            step(relative_step, factor=1.0),
        ),
        "closures, equal cells": (_closure(1.0), _closure(1.0)),
        "closures, other cells": (_closure(1.0), _closure(2.0)),
        "closures, 0.0 and -0.0": (_closure(0.0), _closure(-0.0)),
        "closures of one array": (_closure(same), _closure(same)),
        "closures of equal lists": (_closure([1]), _closure([1])),
        "nested closures, equal": (_nested(2.0), _nested(2.0)),
        "nested closures, other": (_nested(2.0), _nested(3.0)),
        "two lambda expressions": ((lambda x: x), (lambda x: x)),
        "methods of equal helpers": (Stepper(0.5).step, Stepper(0.5).step),
        "methods of other helpers": (Stepper(0.5).step, Stepper(0.6).step),
        "methods of identity objects": (_Plain().step, _Plain().step),
        "optax optimizers": (optax.adam(1e-3), optax.adam(1e-3)),
        "static partials": (
            _StaticFn(step(relative_step, factor=0.1)),
            _StaticFn(step(relative_step, factor=0.1)),
        ),
        "static closures, other cells": (
            _StaticFn(_closure(1.0)),
            _StaticFn(_closure(2.0)),
        ),
    }


def _traces(jit, a, b) -> int:
    traces = []

    @jit
    def f(tree, x):
        traces.append(None)
        return x

    f(a, jnp.ones(1))
    f(b, jnp.ones(1))
    return len(traces)


def test_the_audit_agrees_with_eqx_filter_jit_on_callables():
    for label, (a, b) in _callable_pairs().items():
        assert bool(af.audit(a, b)) == (_traces(eqx.filter_jit, a, b) == 2), label


def test_af_filter_jit_traces_again_exactly_where_the_audit_says():
    # It keys callables as equinox does; what it shares is the compile.
    for label, (a, b) in _callable_pairs().items():
        assert bool(af.audit(a, b)) == (_traces(af.filter_jit, a, b) == 2), label


class _Forward(eqx.Module):
    forward: object

    def __init__(self, wrap):
        self.forward = wrap(lambda x: 2 * x)


def test_jit_wrappers_made_per_instance_are_reported_and_really_recompile():
    (finding,) = af.audit(_Forward(jax.jit), name="model")
    assert finding.path == "model.forward"
    assert str(finding).startswith(
        "model.forward = jax.jit(<function _Forward.__init__.<locals>.<lambda>>): "
        "a jax.jit wrapper is hashed by identity, so one made per instance"
    )
    (finding,) = af.audit(_Forward(eqx.filter_jit), name="model")
    assert finding.path == "model.forward"  # not its name string, `forward.fn`
    assert finding.hint.startswith("a filter_jit wrapper (eqx or af) around a closure")
    for wrap in (jax.jit, eqx.filter_jit):
        assert _eqx_traces(_Forward(wrap), _Forward(wrap)) == 2
        assert af.audit(_Forward(wrap), _Forward(wrap))


class Observatory:  # compared by identity; its name starts with a vowel
    pass


def test_an_identity_compared_object_gets_the_value_equality_hint():
    (finding,) = af.audit({"wcs": Wcs(0.2)}, name="frame")
    assert finding.hint == (
        "a Wcs compares by identity (it defines no __eq__), so every new Wcs is a "
        "new cache key: give Wcs value equality (__eq__ and __hash__), or keep it "
        "out of the jitted arguments"
    )
    (finding,) = af.audit({"site": Observatory()})
    assert finding.hint.startswith("an Observatory compares by identity")


def test_a_leaf_inside_a_tuple_field_is_named_by_that_field():
    class Box(eqx.Module):
        origin: tuple

    (finding,) = af.audit(Box((1, 2)), Box((1, 3)), name="box")
    assert finding.path == "box.origin[1]"
    assert "<locals>.Box.origin (test_audit.py:" in finding.field


def test_class_body_defaults_and_equal_values_built_at_run_time_are_constants():
    class Block(eqx.Module):
        w: jnp.ndarray
        act: object = lambda x: x  # made once, with the class
        mode: str = "fast"
        scale: float = 1.0

    built = "".join(["fa", "st"])  # equal to the default, another object
    block = Block(jnp.ones(2), mode=built, scale=float("1.0"))
    assert block.mode is not Block.__dataclass_fields__["mode"].default
    assert af.audit(block) == []


@needs_sharing
def test_an_eqx_filter_jit_wrapper_per_instance_is_one_finding_at_its_field():
    findings = af.audit(_Forward(eqx.filter_jit), _Forward(eqx.filter_jit), name="m")
    by_path = {f.path: f.recompiles for f in findings}
    assert by_path == {"m.forward": ("eqx.filter_jit",)}


def _wrapped_per_call():
    @functools.wraps(relative_step)
    def wrapper(x, factor):
        return relative_step(x, factor)

    return wrapper


_CALLBACKS: list = []


def test_a_wraps_copy_made_per_call_or_a_closure_in_a_module_list_is_reported():
    # functools.wraps gives the copy the module-level function's name: it is
    # still a new object per call, and compiles again.
    copy = _wrapped_per_call()
    assert copy.__qualname__ == relative_step.__qualname__
    assert [f.path for f in af.audit({"fn": copy})] == ['tree["fn"]']
    assert af.audit({"fn": relative_step}) == []
    _CALLBACKS.append(lambda x: x)  # a list may gain a new closure per call
    assert [f.path for f in af.audit({"fn": _CALLBACKS[-1]})] == ['tree["fn"]']
    _CALLBACKS.clear()


def test_assert_clean_of_two_trees_fails_only_on_what_the_chosen_jit_compiles():
    a, b = _field(wcs=_WCS), _field(wcs=_WCS)  # new partials, lambdas, methods
    af.assert_clean(a, b, jit="af.filter_jit")  # nothing certain to compile
    with pytest.raises(af.AuditError) as info:
        af.assert_clean(a, b)
    assert str(info.value).startswith(
        "af.audit: the other tree compiles again: 3 leaves differ for "
        "eqx.filter_jit; 0 certainly for af.filter_jit"
    )
    with pytest.raises(af.AuditError):
        af.assert_clean(a, _field(wcs=_WCS, shape=4), jit="af.filter_jit")
    with pytest.raises(ValueError, match=re.escape("jit='jax.jit': af.audit knows")):
        af.assert_clean(a, b, jit="jax.jit")  # pyright: ignore[reportArgumentType]


def test_a_counter_at_its_default_needs_two_trees_to_be_seen():
    class State(eqx.Module):
        w: jnp.ndarray
        step: int = 0

    assert af.audit(State(jnp.ones(2))) == []  # one snapshot: a constant
    (finding,) = af.audit(State(jnp.ones(2)), State(jnp.ones(2), step=1))
    assert (finding.path, finding.value, finding.other) == ("tree.step", 0, 1)
    assert finding.kind == "value"


def test_a_one_tree_finding_inside_a_tuple_field_names_that_field():
    class Box(eqx.Module):
        origin: tuple

    (finding,) = af.audit(Box(("a",)), name="box")
    assert finding.path == "box.origin[0]"
    assert "<locals>.Box.origin (test_audit.py:" in finding.field


@needs_sharing
def test_jax_jit_wrappers_of_equal_closures_trace_again_and_share_a_compile():
    a, b = _Forward(jax.jit), _Forward(jax.jit)
    by_path = {f.path: f.recompiles for f in af.audit(a, b, name="m")}
    assert by_path == {"m.forward": ("eqx.filter_jit",)}
    traces: list[None] = []

    @af.filter_jit
    def run(model, x):
        traces.append(None)
        return model.forward(x)

    run(a, jnp.ones(2))
    run(b, jnp.ones(2))
    assert len(traces) == 2  # a new cache key, as the audit says


def _step_reading_flux(field):
    # Reads the partial, the lambda, the helper and the flux; never the key or
    # the WCS, which differ per field by identity or value.
    return field.render(field.step(field.image)) * field.helper(field.flux)


@needs_sharing
def test_with_the_function_the_audit_names_only_the_leaves_the_program_reads():
    a, b = _field(), _field(key="0x7f")  # new callables, a new WCS, another key
    findings = af.audit(a, b, name="field", fn=_step_reading_flux)
    assert [f.path for f in findings] == [
        "field.step",
        "field.render",
        "field.helper",
        "field.wcs",
        "field.key",
    ]
    assert findings.compiling("af.filter_jit") == []  # one program for both
    c = _field(flux=2.0)  # flux is read: a literal of the program
    exact = af.audit(a, c, name="field", fn=_step_reading_flux)
    assert [f.path for f in exact.compiling("af.filter_jit")] == ["field.flux"]
    assert {f.path for f in exact.compiling("eqx.filter_jit")} >= {"field.flux"}
    # What af.filter_jit really does with the two pairs of fields:
    jax.clear_caches()
    compiles: list[str] = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(str(kwargs.get("fun_name")))

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        step = af.filter_jit(_step_reading_flux)
        step(a), step(b)
        after_b = sum("_step_reading_flux" in n for n in compiles)
        step(c)
        after_c = sum("_step_reading_flux" in n for n in compiles)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert (after_b, after_c) == (1, 2)


# -- annotations are read, never run ---------------------------------------------------

_SIDE_EFFECTS = """
from __future__ import annotations

from typing import Annotated, Optional

import equinox as eqx
import jax
from jaxtyping import Array, Float

CALLS = []


def boom():
    CALLS.append("boom")
    return "n"


def f():
    CALLS.append("f")
    return float


class Trap(eqx.Module):
    dims: Float[Array, boom()]
    kind: f()


class Described(eqx.Module):
    weight: Annotated[Float[Array, ""], boom()]


class Ordinary(eqx.Module):
    vector: Float[Array, "n"]
    array: jax.Array
    count: Optional[int]
    scalars: list[Float[Array, ""]]
"""


@pytest.fixture
def annotated(tmp_path):
    path = tmp_path / "annotated_scene.py"
    path.write_text(_SIDE_EFFECTS)
    with script_module(path, "annotated_scene") as module:
        yield module


def test_audit_and_explain_retraces_never_run_a_call_in_an_annotation(annotated):
    trap = annotated.Trap(dims=1.0, kind=2.0)
    findings = af.audit(trap, name="trap")
    assert [f.path for f in findings] == ["trap.dims", "trap.kind"]
    assert "store an array in Trap.dims" in findings[0].hint  # unread: no claim
    af.audit(trap, annotated.Trap(dims=2.0, kind=3.0), name="trap")

    @af.explain_retraces
    @eqx.filter_jit
    def step(trap):
        return trap

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step(trap)
        step(annotated.Trap(dims=2.0, kind=3.0))
    assert any("trap.dims: 1.0 -> 2.0" in str(w.message) for w in caught)
    # Annotated's metadata is not read, its type is: the field is an array field.
    (described,) = af.audit(annotated.Described(weight=1.0))
    assert "but holds a Python number: subclass af.ArrayModule" in described.hint
    assert annotated.CALLS == []


@pytest.mark.parametrize("name", ["vector", "array", "count", "scalars"])
def test_ordinary_string_annotations_are_read_as_eval_reads_them(annotated, name):
    owner = annotated.Ordinary
    text = owner.__annotations__[name]
    read, evaluated = (
        _annotations.read_annotation(text, owner),
        resolve_annotation(text, owner),
    )
    assert repr(read) == repr(evaluated)  # jaxtyping makes a new class each time
    assert field_spec(read) == field_spec(evaluated)


def test_ordinary_string_annotations_get_the_hints_they_got(annotated):
    model = annotated.Ordinary(vector=1.0, array=2.0, count=3, scalars=[4.0])
    hints = {f.path: f.hint for f in af.audit(model, name="m")}
    assert (
        "Ordinary.vector is annotated Float[Array, 'n'] but holds a"
        in (hints["m.vector"])
    )
    assert "Ordinary.array is annotated jax.Array but holds a" in hints["m.array"]
    assert (
        "Ordinary.count is annotated Optional[int]: if its value changes between "
        'calls (a step counter, an index into data), annotate it Int[Array, ""]'
    ) in hints["m.count"]
    assert "if it is a shape, size or id that stays fixed" in hints["m.count"]
    assert "m.scalars[0]" in hints


# -- the swap to af.ArrayModule makes float constants trainable ------------------------


class Norm(eqx.Module):
    w: Float[Array, "3"]
    eps: Float[Array, ""] = 1e-5
    steps: Int[Array, ""] = 3
    gain: Float[Array, ""] = 2


class SwappedNorm(af.ArrayModule):
    w: Float[Array, "3"]
    eps: Float[Array, ""] = 1e-5
    steps: Int[Array, ""] = 3
    gain: Float[Array, ""] = 2


def test_the_audit_says_where_the_swap_makes_a_field_trainable():
    hints = {f.path: f.hint for f in af.audit(Norm(jnp.ones(3)), name="layer")}
    assert list(hints) == ["layer.eps", "layer.steps", "layer.gain"]
    # Exactly the fields an optimizer trains after the swap get the warning.
    swapped = SwappedNorm(jnp.ones(3))
    trained = eqx.filter(swapped, eqx.is_inexact_array)
    assert trained.eps is not None and trained.gain is not None
    assert trained.steps is None
    for path in hints:
        assert "subclass af.ArrayModule" in hints[path]
        says = "that makes it trainable" in hints[path]
        assert says == (path != "layer.steps"), path
    # The fixes are those of the codemod's AF007.
    assert "annotate it `float` and declare it static=True" in hints["layer.eps"]
    assert "declare it `af.field(convert=False)`" in hints["layer.eps"]
    assert "wrap its uses in `jax.lax.stop_gradient`" in hints["layer.eps"]


def test_a_constant_kept_a_python_number_with_convert_false_is_clean():
    class Kept(af.ArrayModule):
        w: Float[Array, "3"]
        eps: Float[Array, ""] = af.field(convert=False, default=1e-5)

    assert af.audit(Kept(jnp.ones(3))) == []
    (finding,) = af.audit(Kept(jnp.ones(3), eps=0.1))  # not the default: hashed
    assert "is af.field(convert=False)" in finding.hint


def test_explain_retraces_says_where_the_swap_makes_a_field_trainable():
    @af.explain_retraces
    @eqx.filter_jit
    def apply(layer):
        return layer.w * layer.eps

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        apply(Norm(jnp.ones(3)))
        apply(Norm(jnp.ones(3), eps=1e-6))
        apply(Norm(jnp.ones(3), steps=4))
    eps, steps = (str(w.message) for w in caught)
    assert "layer.eps: 1e-05 -> 1e-06" in eps
    assert "that makes it trainable" in eps
    assert "layer.steps: 3 -> 4" in steps
    assert "that makes it trainable" not in steps


# -- a shape field: the codemod's advice and the audit's agree -----------------------

_GRID = """
import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float, Int


class Grid(eqx.Module):
    values: Float[Array, "n"]
    shape: Int[Array, "2"]

    def image(self):
        return jnp.zeros(self.shape) + self.values.sum()
"""


def test_a_shape_field_gets_the_codemods_advice_and_is_clean_once_fixed(tmp_path):
    path = tmp_path / "grid_scene.py"
    path.write_text(_GRID)
    with script_module(path, "grid_scene") as plain:
        findings = af.audit(plain.Grid(jnp.ones(3), (4, 5)), name="grid")
    assert [f.path for f in findings] == ["grid.shape[0]", "grid.shape[1]"]
    assert "declare it af.field(convert=False)" in findings[0].hint
    assert "static=True" not in findings[0].hint

    fixed = run_cli("migrate", "--fix", str(path))
    assert fixed.returncode == 0, fixed.stderr
    assert 'shape: Int[Array, "2"] = af.field(convert=False)' in path.read_text()
    with script_module(path, "grid_scene") as migrated:
        small = migrated.Grid(jnp.ones(3), (4, 5))
        large = migrated.Grid(jnp.ones(3), (4, 6))
        assert af.audit(small) == []
        af.assert_clean(small)
        # It works as a shape under both jits, and a new shape compiles again.
        for jit in (eqx.filter_jit, af.filter_jit):
            assert jit(lambda grid: grid.image())(large).shape == (4, 6)
        (change,) = af.audit(small, large, name="grid")
    assert change.path == "grid.shape[1]"
    assert "is af.field(convert=False), so this int stays a Python int" in (change.hint)
    assert "static=True" not in change.hint


_INTERNALS = ("_fallback", "_cached", "_plan", "_static_fun", "Layout", "_Plan")


@pytest.mark.parametrize("jit", [af.filter_jit, eqx.filter_jit])
def test_jit_wrappers_are_reported_as_the_function_they_wrap(jit):
    made = [jit(lambda x: x + 1), jit(lambda x: x + 2)]  # one closure per instance
    two = af.audit(made[0], made[1], name="step")
    assert [(f.path, f.kind) for f in two] == [("step", "callable")]
    one = af.audit({"step": made[0]})
    assert [f.path for f in one] == ['tree["step"]']
    for report in (str(two), str(one)):
        assert not any(name in report for name in _INTERNALS), report
    same = jit(relative_step)
    assert af.audit(same, jit(relative_step)) == []  # equinox shares them too
