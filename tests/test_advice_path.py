"""The many-fields user's path, followed as printed: what `explain_retraces`
advises for a box origin that the code clips with Python's `max()`/`min()`
(as scarlet2's `Box.overlap` does) works when applied, and leads from one
compile per field to one family per shape set.

The origin is a plain tuple of ints, not `static=True`: nothing in the
arguments says that it cannot be an array; only tracing the step with it as
one shows that (`max()` of a tracer raises). Advice to make it an array would
raise when followed.
"""

from __future__ import annotations

import functools
import os
import warnings
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jaxtyping import Array, Float

import arrayfield as af
from arrayfield import _jax_private
from helpers import compiles_of

pytestmark = pytest.mark.skipif(
    _jax_private.sharing_problem() is not None,
    reason="sharing compiles needs a JAX whose traced jits show their program",
)

FRAME = 20
BOX = 8
STEPS = 2
CLIPPED = 3  # this field's second box starts left of the frame


class Box(eqx.Module):
    origin: tuple[int, int]  # scarlet2's Box.origin: a plain tuple, not static
    shape: tuple[int, int] = eqx.field(static=True)


class Source(af.ArrayModule):
    flux: Float[Array, ""]
    width: Float[Array, ""]
    box: Box


class Scene(af.ArrayModule):
    sources: list[Source]


def overlap(box: Box) -> tuple[slice, slice, slice, slice]:
    """The part of the box inside the frame, in frame and in box pixels."""
    y0, x0 = box.origin
    top, left = max(y0, 0), max(x0, 0)  # Python's max: the origin is an int
    bottom, right = min(y0 + box.shape[0], FRAME), min(x0 + box.shape[1], FRAME)
    return (
        slice(top, bottom),
        slice(left, right),
        slice(top - y0, bottom - y0),
        slice(left - x0, right - x0),
    )


_PIXELS = np.mgrid[0:BOX, 0:BOX].astype(np.float32) - (BOX - 1) / 2


def render(scene: Scene) -> jax.Array:
    frame = jnp.zeros((FRAME, FRAME))
    for source in scene.sources:
        fy, fx, by, bx = overlap(source.box)
        blob = source.flux * jnp.exp(
            -(_PIXELS[0] ** 2 + _PIXELS[1] ** 2) / (2 * source.width**2)
        )
        frame = frame.at[fy, fx].add(blob[by, bx])
    return frame


optim = optax.adam(0.05)


def loss(scene: Scene, data: jax.Array) -> jax.Array:
    return jnp.sum((render(scene) - data) ** 2)


def step(scene: Scene, opt_state, data: jax.Array):
    value, grads = eqx.filter_value_and_grad(loss)(scene, data)
    updates, opt_state = optim.update(grads, opt_state)
    return eqx.apply_updates(scene, updates), opt_state, value


def build_scene(field: int, origin=tuple) -> Scene:
    rng = np.random.default_rng(field)
    origins = [tuple(int(v) for v in rng.integers(1, FRAME - BOX, 2)) for _ in "ab"]
    if field == CLIPPED:
        origins[1] = (origins[1][0], -3)
    return Scene(
        [
            Source(1.0 + i, 1.5, Box(origin(o), (BOX, BOX)))
            for i, o in enumerate(origins)
        ]
    )


def survey(jit, fields: int = 6) -> list[str]:
    """Fit `fields` fields one after another with one jitted step; the step's
    compiles per field."""
    jitted = jit(step)
    compiles = []
    for field in range(fields):
        scene = build_scene(field)
        data = render(build_scene(100 + field)) if field != CLIPPED else jnp.ones(1)
        data = jnp.broadcast_to(data, (FRAME, FRAME))
        opt_state = optim.init(eqx.filter(scene, eqx.is_inexact_array))
        with compiles_of("step") as seen:
            for _ in range(STEPS):
                scene, opt_state, _ = jitted(scene, opt_state, data)
        compiles.append(len(seen))
    return compiles


def explained(jit, fields: int = 6) -> tuple[list[int], list[warnings.WarningMessage]]:
    jax.clear_caches()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            compiles = survey(jit, fields)
    told = [
        w for w in caught if issubclass(w.category, af.RetraceWarning | af.RetraceNote)
    ]
    return compiles, told


def fixes_for_origin(text: str) -> list[str]:
    return [
        line.split("fix: ", 1)[1]
        for line in text.splitlines()
        if "origin" in line and "fix: " in line
    ]


def test_the_array_advice_would_raise_here():
    # What an arguments-only rule advised (annotate the origin Int[Array, "2"]):
    # followed, the step cannot be traced.
    scene = build_scene(0, origin=jnp.asarray)
    with pytest.raises(jax.errors.TracerBoolConversionError):
        eqx.filter_jit(loss)(scene, jnp.zeros((FRAME, FRAME)))


def test_under_eqx_the_advice_keeps_the_origin_a_number_and_names_the_option():
    compiles, told = explained(eqx.filter_jit)
    assert compiles == [1] * 6  # a compile per field: the cost to remove
    # One full warning, then one line for the 4 retraces with its causes.
    first, repeats = (str(w.message) for w in told)
    assert all(w.category is af.RetraceWarning for w in told)
    assert "4 more times for the causes of its warning above" in repeats
    line = overlap.__code__.co_firstlineno + 3  # the `max()` of the origin
    fixes = fixes_for_origin(first)
    assert len(fixes) == 2  # the cause's line, and its details
    for fix in fixes:
        assert fix.startswith("keep it a Python number"), fix
        assert f"TracerBoolConversionError at tests/test_advice_path.py:{line}" in fix
        assert "af.filter_jit(..., share_numbers=True)" in fix
    assert "Int[Array" not in first and "jnp.asarray" not in first


def test_followed_the_advice_compiles_once_per_family_and_never_raises():
    # The advice applied as printed: af.filter_jit(..., share_numbers=True) in
    # place of eqx.filter_jit, no change to the code.
    shared = survey(functools.partial(af.filter_jit, share_numbers=True))
    jax.clear_caches()
    # Fields 0 and 1 compile the first family (its own program, then the one
    # over its numbers); the clipped field starts a family of its own.
    assert shared == [1, 1, 0, 1, 0, 0]
    assert sum(shared) < sum(survey(eqx.filter_jit))


def test_under_the_option_retraces_that_share_are_notes():
    compiles, told = explained(
        functools.partial(af.filter_jit, share_numbers=True), fields=CLIPPED
    )
    assert compiles == [1, 1, 0]
    assert [w.category for w in told] == [af.RetraceNote, af.RetraceNote]
    for w in told:
        assert "nothing needs to change" in str(w.message)
        assert "fix:" not in str(w.message)


class Handle:
    """A per-call object with no value equality (a library's closure, say)."""


def tagged_step(scene: Scene, opt_state, data: jax.Array, handle: Handle):
    return step(scene, opt_state, data)


def test_a_note_lists_its_other_causes_once():
    # scarlet2 makes ten such objects per fit: each note listed all ten again.
    jax.clear_caches()
    jitted = af.filter_jit(tagged_step, share_numbers=True)
    data = jnp.ones((FRAME, FRAME))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            for field in range(3):  # a field, its family's program, one sharing it
                scene = build_scene(field)
                opt_state = optim.init(eqx.filter(scene, eqx.is_inexact_array))
                jitted(scene, opt_state, data, Handle())
    first, second = [str(w.message) for w in caught if w.category is af.RetraceNote]
    assert "\n  handle: <" in first and "fix: give Handle value equality" in first
    assert "Its other causes are those a note above listed (handle)" in second
    assert "\n" not in second


def test_the_docs_error_filter_passes_where_every_retrace_shares():
    jax.clear_caches()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        warnings.simplefilter("error", af.RetraceWarning)
        with af.explain_retraces():
            compiles = survey(
                functools.partial(af.filter_jit, share_numbers=True), fields=CLIPPED
            )
    assert compiles == [1, 1, 0]


def test_a_clipped_box_says_what_size_keeps_it_apart():
    _, told = explained(functools.partial(af.filter_jit, share_numbers=True))
    (warning,) = [w for w in told if w.category is af.RetraceWarning]
    text = str(warning.message)
    assert "Its program starts family 2" in text
    assert "gives f32[8,5], a shape no operation of the closest program gives" in text
    assert "a slice or block of another size" in text
    assert "pad to them" in text
    assert not any(f.startswith("give it an array") for f in fixes_for_origin(text))


def test_the_trial_trace_runs_once_per_field_and_leaves_the_cache_alone():
    # The advice is tried by tracing the Python function once more, abstractly:
    # once per function and field, not per retrace; it compiles nothing.
    traces = []

    def counted(scene, opt_state, data):
        traces.append(1)
        return step(scene, opt_state, data)

    jax.clear_caches()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        with af.explain_retraces():
            jitted = eqx.filter_jit(counted)
            with compiles_of("counted") as seen:
                for field in range(4):
                    scene = build_scene(field)
                    data = jnp.zeros((FRAME, FRAME))
                    state = optim.init(eqx.filter(scene, eqx.is_inexact_array))
                    jitted(scene, state, data)
                    jitted(scene, state, data)  # the same arguments: cached
    assert len(seen) == 4  # one per field, none from the trial
    assert len(traces) == 4 + 1  # a trace per field, and one trial


def test_the_unasked_warning_says_when_the_origin_must_stay_a_number():
    # af.filter_jit's own warning (at the 8th field) cannot try the advice (a
    # trial would trace the user's function once more, unasked), so its array
    # advice says where it would raise, and what to do then.
    jax.clear_caches()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiles = survey(af.filter_jit, fields=8)  # warned by the 8th field
    assert compiles == [1] * 8
    (text,) = [str(w.message) for w in caught if w.category is af.RetraceWarning]
    for fix in fixes_for_origin(text):
        assert "but where step uses it as a Python value" in fix
        assert "keep it a number and share the program" in fix
        assert "af.filter_jit(..., share_numbers=True)" in fix


def test_a_jitted_function_of_an_installed_package_says_whose_fixes_they_are(
    monkeypatch,
):
    # As scarlet2's `_make_step`, called by scarlet2's own `fit`: this test
    # file stands in for the installed package.
    from arrayfield.diagnostics import _paths

    here = str(Path(__file__).resolve().parent)
    monkeypatch.setattr(_paths, "_install_dirs", lambda: (here + os.sep,))

    class Setting:  # compared by identity: a new one each call
        pass

    @eqx.filter_jit
    def packaged(x, setting):
        return x + 1

    jax.clear_caches()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            packaged(jnp.ones(2), Setting())
            packaged(jnp.ones(2), Setting())
    (text,) = [str(w.message) for w in caught if w.category is af.RetraceWarning]
    assert "value equality" in text, text
    assert (
        "packaged is defined in the installed package test_advice_path: what "
        "test_advice_path makes anew on each call"
    ) in text


def test_audit_with_the_step_keeps_the_origin_a_number():
    # audit(tree, other, fn=...) tries the array advice as explain_retraces does.
    data = jnp.zeros((FRAME, FRAME))
    findings = af.audit(build_scene(0), build_scene(1), fn=lambda s: loss(s, data))
    origin = [f for f in findings if ".origin[" in f.path]
    assert origin
    for f in origin:
        assert f.hint.startswith("keep it a Python number"), f.hint
        assert "TracerBoolConversionError" in f.hint
        assert "af.filter_jit(..., share_numbers=True)" in f.hint
    report = str(findings)
    assert "Int[Array" not in report and "keep it a Python number" in report


def test_a_count_over_several_trees_names_them():
    # An optimizer state holding copies of a field's numbers: the count of
    # leaves says which arguments it covers.
    class Knob(eqx.Module):
        k: float

    @eqx.filter_jit
    def scaled(x, knob, state):
        return x * knob.k + state[0].k

    jax.clear_caches()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            for k in (1.0, 2.0):
                scaled(jnp.ones(2), Knob(k), (Knob(k),))
    (text,) = [str(w.message) for w in caught if w.category is af.RetraceWarning]
    assert "knob.k and 1 more, in state (" in text, text
