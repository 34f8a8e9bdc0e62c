"""`af.export` and `af.deserialize`: a step over ArrayModules (static int and
float fields, Python numbers, an optax state, non-array outputs) saved in one
process and run in another, bitwise equal to the live call, and refusing calls
with another static part (issue 51, item 3)."""

from __future__ import annotations

import json
import sys
import textwrap

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import arrayfield as af
from arrayfield import _layouts
from helpers import assert_bitwise, python, script_module

# The step's module: the loading process imports its classes by name.
MODEL = textwrap.dedent(
    """
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import optax
    from jaxtyping import Array, Float

    import arrayfield as af


    class Source(af.ArrayModule):
        flux: Float[Array, ""]
        centre: Float[Array, "2"]
        origin: tuple = af.field(static=True)
        reg: float = af.field(static=True, default=0.1)


    OPTIMISER = optax.adam(1e-2)


    def loss(source, image):
        y0, x0 = source.origin
        patch = image[y0 : y0 + 4, x0 : x0 + 4]
        model = source.flux * jnp.exp(-jnp.sum(source.centre**2))
        return jnp.sum((patch - model) ** 2) + source.reg * source.flux**2


    @af.filter_jit
    def step(source, state, image, count):
        value, grads = jax.value_and_grad(loss)(source, image)
        updates, state = OPTIMISER.update(grads, state, source)
        return eqx.apply_updates(source, updates), state, value, "stepped", count + 1


    def arguments(origin=(1, 2), reg=0.1, flux=1.0):
        source = Source(flux=flux, centre=[0.1, 0.2], origin=origin, reg=reg)
        state = OPTIMISER.init(eqx.filter(source, eqx.is_array))
        image = jnp.arange(64.0).reshape(8, 8) / 64
        return source, state, image, 3
    """
)

LOADER = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import jax
    import arrayfield as af
    from exported_model import arguments

    loaded = af.deserialize(open(sys.argv[1], "rb").read())
    source, state, value, note, count = out = loaded(*arguments(flux=1.5))
    leaves = jax.tree_util.tree_leaves(out)
    arrays = [np.asarray(x) for x in leaves if hasattr(x, "dtype")]
    np.savez(sys.argv[2], *arrays)
    refused = []
    for changed in ({"origin": (1, 3)}, {"reg": 0.2}):
        try:
            loaded(*arguments(flux=1.5, **changed))
        except TypeError as error:
            refused.append(str(error))
    print(json.dumps({
        "others": [note, count, type(source).__name__, source.origin, source.reg],
        "refused": refused,
    }))
    """
)


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "exported_model.py"
    path.write_text(MODEL)
    with script_module(path, "exported_model") as module:
        yield module


def test_an_exported_step_returns_the_live_result(model):
    args = model.arguments()
    exported = af.export(model.step, *args)
    for flux in (1.0, -2.0):  # new array values, the same static part
        call = model.arguments(flux=flux)
        assert_bitwise(exported(*call), model.step(*call))
    # Specs where arrays go (eqx.filter_eval_shape's output): the same program.
    specs = eqx.filter_eval_shape(lambda: args[:3])
    from_specs = af.export(model.step, *specs, 3)
    assert_bitwise(from_specs(*args), model.step(*args))
    assert repr(exported) == "af.Exported(step)"


def test_another_static_part_raises_naming_it(model):
    exported = af.export(model.step, *model.arguments())
    with pytest.raises(TypeError, match=r"source\.origin\[1\] is 3 where it was 2"):
        exported(*model.arguments(origin=(1, 3)))
    with pytest.raises(TypeError, match=r"source\.reg is 0\.2 where it was 0\.1"):
        exported(*model.arguments(reg=0.2))
    source, state, image, _ = model.arguments()
    with pytest.raises(TypeError, match=r"count is 4 where it was 3"):
        exported(source, state, image, 4)
    with pytest.raises(TypeError, match="by position and keyword"):  # as exported
        exported(source, state, image, count=3)
    with pytest.raises(TypeError, match=r"image is f32\[4,8\] where it was f32\[8,8\]"):
        exported(source, state, image[:4], 3)


@pytest.mark.skipif(
    tuple(map(int, eqx.__version__.split(".")[:2])) < (0, 13),
    reason="equinox 0.12 keeps class annotations in rebuilt Modules' tree structure",
)
def test_a_fresh_process_loads_it_and_gets_the_live_result_bitwise(model, tmp_path):
    data = af.export(model.step, *model.arguments()).serialize()
    (tmp_path / "step.bin").write_bytes(data)
    (tmp_path / "loader.py").write_text(LOADER)
    env = {"PYTHONPATH": str(tmp_path)}
    done = python("loader.py", "step.bin", "out.npz", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])
    live = model.step(*model.arguments(flux=1.5))
    arrays = [x for x in jax.tree_util.tree_leaves(live) if hasattr(x, "dtype")]
    saved = np.load(tmp_path / "out.npz")
    assert len(saved.files) == len(arrays)
    for i, x in enumerate(arrays):
        loaded = saved[f"arr_{i}"]
        assert loaded.dtype == x.dtype and loaded.tobytes() == np.asarray(x).tobytes()
    assert got["others"] == ["stepped", 4, "Source", [1, 2], 0.1]
    assert [m.split(": ")[1].split(".")[0] for m in got["refused"]] == [
        "source",
        "source",
    ]
    assert "origin[1] is 3 where it was 2" in got["refused"][0]
    assert "reg is 0.2 where it was 0.1" in got["refused"][1]


def test_prng_keys_are_inputs_too():
    def noisy(key, x):
        return x + jax.random.normal(key, x.shape)

    key, x = jax.random.key(0), jnp.ones(2)
    exported = af.export(noisy, key, x)
    assert_bitwise(exported(key, x), af.filter_jit(noisy)(key, x))
    try:
        data = exported.serialize()
    except KeyError:  # JAX 0.4's serialization has no PRNG key types
        pytest.skip("this JAX cannot serialize a program that takes PRNG keys")
    loaded = af.deserialize(data)
    assert_bitwise(loaded(key, x), af.filter_jit(noisy)(key, x))
    other = r"key is key<rbg>\[\] where it was key<fry>\[\]"
    with pytest.raises(TypeError, match=other):
        loaded(jax.random.key(0, impl="rbg"), x)


def test_non_array_parts_that_do_not_pickle_are_refused_at_serialize():
    class Local(af.ArrayModule):  # a local class: pickle cannot name it
        scale: float = af.field(static=True)

    exported = af.export(lambda m, x: x * m.scale, Local(scale=2.0), jnp.ones(2))
    np.testing.assert_array_equal(exported(Local(scale=2.0), jnp.ones(2)), [2.0, 2.0])
    with pytest.raises(TypeError, match=r"must pickle.*top level"):
        exported.serialize()


def test_bytes_that_are_no_step_are_refused():
    with pytest.raises(ValueError, match=r"not a step written by af\.export"):
        af.deserialize(b"\x00" * 64)


def test_a_class_the_loading_process_lacks_is_named(model, tmp_path):
    data = af.export(model.step, *model.arguments()).serialize()
    code = (
        "import sys, arrayfield as af\naf.deserialize(open(sys.argv[1], 'rb').read())"
    )
    (tmp_path / "step.bin").write_bytes(data)
    done = python("-c", code, tmp_path / "step.bin")  # no PYTHONPATH: no model
    assert done.returncode != 0
    assert "exported_model" in done.stderr
    assert "import the modules that define their classes" in done.stderr


def test_without_flatbuffers_the_extra_is_named(model, monkeypatch):
    exported = af.export(model.step, *model.arguments())
    monkeypatch.setitem(sys.modules, "flatbuffers", None)  # import raises
    with pytest.raises(ImportError, match=r"arrayfield\[export\]"):
        exported.serialize()


# -- a family: one exported program for fields that differ only in numbers ----

needs_number_sharing = pytest.mark.skipif(
    _layouts.numbers_unshared() is not None,
    reason="sharing programs that differ in numbers needs a JAX whose traced "
    "jits show their program",
)
# docs/many_fields.md's bound for shared numbers, of the leaf's largest value.
BOUND = 1e-5

FAMILY_LOADER = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import jax
    import arrayfield as af
    from exported_model import arguments, step

    data = open(sys.argv[1], "rb").read()
    try:
        af.deserialize(data)
    except TypeError as error:
        without_step = str(error)
    family = af.deserialize(data, step)
    compiles = []
    outputs = {}
    for origin, reg in (((3, 1), 0.25), ((0, 4), 0.5)):
        call = arguments(origin=origin, reg=reg, flux=1.5)
        with af.count_compiles() as count:
            out = jax.block_until_ready(family(*call))
        compiles.append(count.compiles)
        arrays = [np.asarray(x) for x in jax.tree_util.tree_leaves(out)
                  if hasattr(x, "dtype")]
        np.savez(f"{sys.argv[2]}-{reg}.npz", *arrays)
        outputs[reg] = [out[0].origin, out[3], out[4]]
    try:
        family(*arguments(origin=(1, 2), reg=0.0))
    except TypeError as error:
        zero = str(error)
    print(json.dumps({"compiles": compiles, "outputs": outputs,
                      "without_step": without_step, "zero": zero}))
    """
)


def _arrays(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree) if eqx.is_array(x)]


def _assert_within_bound(got, want):
    got, want = _arrays(got), _arrays(want)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        scale = max(float(np.max(np.abs(b), initial=0.0)), 1e-30)
        assert float(np.max(np.abs(a - b), initial=0.0)) <= BOUND * scale


@needs_number_sharing
def test_a_family_export_runs_fields_with_new_numbers(model):
    fields = [model.arguments(origin=(1, 2), reg=0.1), model.arguments((2, 3), 0.2)]
    family = af.export_family(model.step, *fields)
    assert repr(family) == "af.ExportedFamily(step)"
    eqx_step = eqx.filter_jit(model.step.__wrapped__)
    compiles = []
    for origin, reg in (((1, 2), 0.1), ((3, 1), 0.3), ((0, 4), 0.7)):
        call = model.arguments(origin=origin, reg=reg, flux=1.5)
        with af.count_compiles() as count:
            out = family(*call)
        compiles.append(count.compiles)
        want = eqx_step(*call)
        _assert_within_bound(out, want)
        # What is not an array is this field's own: its trace's outputs.
        assert (out[0].origin, out[0].reg, out[3], out[4]) == (origin, reg, *want[3:])
    assert compiles == [1, 0, 0]  # the exported program, compiled once


@needs_number_sharing
def test_a_family_refuses_what_it_would_not_compute_as_the_field_s_own(model):
    # Exported from fields that vary the origin alone: `reg` stays a literal.
    family = af.export_family(
        model.step, model.arguments(origin=(1, 2)), model.arguments(origin=(2, 3))
    )
    family(*model.arguments(origin=(4, 0)))
    with pytest.raises(TypeError, match=r"is 0\.3 here where it was 0\.1"):
        family(*model.arguments(reg=0.3))
    source, state, image, count = model.arguments()
    with pytest.raises(TypeError, match="program of another family"):
        family(source, state, image[:6, :6], count)  # another image shape
    varying = af.export_family(
        model.step, model.arguments(reg=0.1), model.arguments(reg=0.2)
    )
    with pytest.raises(TypeError, match="float zero, subnormal, infinite or NaN"):
        varying(*model.arguments(reg=0.0))
    with pytest.raises(ValueError, match="call 2's program differs from call 1's"):
        af.export_family(
            model.step,
            (source, state, image, count),
            (source, state, image[:6, :6], count),
        )
    with pytest.raises(TypeError, match="as a tuple"):
        af.export_family(model.step, [source, state, image, count])


@needs_number_sharing
@pytest.mark.skipif(
    tuple(map(int, eqx.__version__.split(".")[:2])) < (0, 13),
    reason="equinox 0.12 keeps class annotations in rebuilt Modules' tree structure",
)
def test_a_fresh_process_loads_a_family_and_runs_new_numbers(model, tmp_path):
    family = af.export_family(
        model.step, model.arguments((1, 2), 0.1), model.arguments((2, 3), 0.2)
    )
    (tmp_path / "family.bin").write_bytes(family.serialize())
    (tmp_path / "loader.py").write_text(FAMILY_LOADER)
    env = {"PYTHONPATH": str(tmp_path)}
    done = python("loader.py", "family.bin", "out", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["compiles"] == [1, 0]  # loading compiles the program once
    assert "pass it, af.deserialize(data, step)" in got["without_step"]
    assert "float zero" in got["zero"]
    eqx_step = eqx.filter_jit(model.step.__wrapped__)
    for origin, reg in (((3, 1), 0.25), ((0, 4), 0.5)):
        live = family(*model.arguments(origin=origin, reg=reg, flux=1.5))
        want = eqx_step(*model.arguments(origin=origin, reg=reg, flux=1.5))
        saved = np.load(tmp_path / f"out-{reg}.npz")
        loaded = [saved[f"arr_{i}"] for i in range(len(saved.files))]
        # Bitwise the exporting process's family; within the bound of eqx's.
        for a, b in zip(loaded, _arrays(live), strict=True):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
        _assert_within_bound(loaded, want)
        assert got["outputs"][str(reg)] == [list(origin), "stepped", 4]
