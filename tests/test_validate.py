"""Opt-in validation of stored arrays against their jaxtyping annotations."""

import re
import textwrap
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Float, Float64, Int, Int64, PyTree

import arrayfield as af
from _jax_compat import enable_x64
from helpers import run_code


class Sources(af.ArrayModule, check=True):
    data: Float[Array, "C"]
    index: Int[Array, "C"]
    weights: Optional[Float[Array, "*batch C"]] = None


def test_valid_instance_passes():
    s = Sources(data=[1.0, 2.0], index=[0, 1], weights=np.ones((4, 2)))
    assert s.data.shape == s.index.shape == (2,)


def test_shape_mismatch_names_field_annotation_and_actual_shape():
    with pytest.raises(af.ValidationError) as info:
        Sources(data=1.0, index=[0])
    message = str(info.value)
    assert "Sources.data" in message
    assert "Float[Array, 'C']" in message
    assert "shape ()" in message and "float32" in message


def test_named_dimension_names_the_field_that_fixed_it():
    with pytest.raises(af.ValidationError) as info:
        Sources(data=[1.0, 2.0], index=[0, 1, 2])
    message = str(info.value)
    assert message.startswith("Sources.index: expected Int[Array, 'C']")
    assert "shape (3,)" in message
    assert "disagree with Sources.data" in message and "shape (2,)" in message


def test_variadic_dims_bind_across_fields():
    with pytest.raises(af.ValidationError, match=r"Sources\.weights.*Sources\.data"):
        Sources(data=[1.0, 2.0], index=[0, 1], weights=np.ones((4, 3)))


def test_dtype_mismatch_is_reported():
    class Override(af.ArrayModule, check=True):
        x: Float[Array, ""] = af.field(dtype="int8")

    with pytest.raises(af.ValidationError, match=r"Override\.x.*int8"):
        Override(x=1)


def test_numpy_field_accepts_the_jax_array_conversion_keeps_but_checks_it():
    class Host(af.ArrayModule, check=True):
        x: Float[np.ndarray, "2"]

    assert type(Host(x=[1, 2]).x) is np.ndarray
    on_device = jnp.zeros(2)
    assert Host(x=on_device).x is on_device  # no copy to the host, and valid
    with pytest.raises(af.ValidationError, match=r"Host\.x: expected .*got JAX array"):
        Host(x=jnp.zeros(3))


def test_validation_runs_before_the_classes_own_check_init():
    calls = []

    class Checked(af.ArrayModule, check=True):
        x: Float[Array, "2"]

        def __check_init__(self):
            calls.append(self.x.shape)

    Checked(x=[1, 2])
    with pytest.raises(af.ValidationError):
        Checked(x=[1, 2, 3])
    assert calls == [(2,)]


def test_subclasses_are_validated_once_including_their_own_fields():
    class Child(Sources):
        extra: Float[Array, "3"] = 0.0

    with pytest.raises(af.ValidationError, match=r"Child\.extra"):
        Child(data=[1.0], index=[1])


def test_validation_under_jit_sees_tracers():
    @jax.jit
    def build(x):
        return Sources(data=x, index=jnp.zeros(3, int)).data

    with pytest.raises(af.ValidationError, match="disagree"):
        build(jnp.zeros(2))
    assert build(jnp.zeros(3)).shape == (3,)


def test_off_by_default():
    class Unchecked(af.ArrayModule):
        x: Float[Array, "3"]

    assert Unchecked(x=1.0).x.shape == ()  # wrong shape, but nobody asked to check


def test_check_false_on_a_subclass_turns_it_off():
    class Relaxed(Sources, check=False):
        pass

    assert Relaxed(data=[1.0, 2.0], index=[0, 1, 2]).index.shape == (3,)


def test_environment_variable_turns_validation_on(tmp_path):
    script = textwrap.dedent(
        """
        from jaxtyping import Array, Float
        import arrayfield as af

        class M(af.ArrayModule):
            x: Float[Array, "3"]

        try:
            M(x=1.0)
        except af.ValidationError as error:
            print("raised:", error)
        """
    )
    result = run_code(script, env={"ARRAYFIELD_CHECK": "1"})
    assert result.returncode == 0, result.stderr
    assert "raised: M.x: expected Float[Array, '3']" in result.stdout


def test_check_false_overrides_the_environment(monkeypatch):
    monkeypatch.setenv("ARRAYFIELD_CHECK", "1")

    class Explicit(af.ArrayModule, check=False):
        x: Float[Array, "3"]

    assert Explicit(x=1.0).x.shape == ()


# -- container fields: every array inside is checked -------------------------------


class Scene(af.ArrayModule, check=True):
    centres: list[Float[Array, "2"]]
    fluxes: dict[str, Float[Array, "band"]]
    bounds: tuple[Float[Array, ""], Float[Array, "2"]]
    extra: PyTree[Float[Array, "band"]] = None
    masks: Optional[list[Int[Array, "band"]]] = None


def _scene(**changes):
    fields = dict(
        centres=[[0.0, 1.0], [2.0, 3.0]],
        fluxes={"g": [1.0, 2.0, 3.0]},
        bounds=(0.0, [1.0, 2.0]),
    )
    return Scene(**{**fields, **changes})


def test_container_fields_that_match_pass():
    scene = _scene(extra={"a": [jnp.ones(3)]}, masks=[[1, 0, 1]])
    assert scene.centres[1].shape == (2,) and scene.masks[0].dtype == jnp.int32


def test_a_list_element_of_the_wrong_shape_is_named():
    with pytest.raises(af.ValidationError) as info:
        _scene(centres=[[0.0, 1.0], [2.0, 3.0, 4.0]])
    message = str(info.value)
    assert message.startswith("Scene.centres[1]: expected Float[Array, '2']")
    assert "shape (3,)" in message


def test_dict_tuple_and_pytree_elements_are_named():
    cases = [
        ({"fluxes": {"g": [[1.0]]}}, "Scene.fluxes['g']"),
        ({"bounds": (0.0, [1.0])}, "Scene.bounds[1]"),
        ({"bounds": ([0.0], [1.0, 2.0])}, "Scene.bounds[0]"),
        ({"extra": {"a": [jnp.ones((3, 1))]}}, "Scene.extra['a'][0]"),
    ]
    for changes, where in cases:
        with pytest.raises(af.ValidationError, match="^" + re.escape(where)):
            _scene(**changes)


def test_named_dimensions_bind_across_elements_and_fields():
    # "band" is 3 from fluxes['g']; a mask of 2 bands disagrees with it.
    with pytest.raises(af.ValidationError) as info:
        _scene(masks=[[1, 0, 1], [1, 0]])
    message = str(info.value)
    assert message.startswith("Scene.masks[1]: expected Int[Array, 'band']")
    assert "disagree with Scene.fluxes['g']" in message
    # Elements of one list bind among themselves too.
    with pytest.raises(af.ValidationError, match=r"^Scene\.fluxes\['r'\]"):
        _scene(fluxes={"g": [1.0, 2.0, 3.0], "r": [1.0, 2.0]})


def test_a_none_element_is_reported_where_the_annotation_does_not_admit_it():
    class Holder(af.ArrayModule, check=True):
        values: list[Float[Array, ""] | None]
        strict: tuple[Float[Array, ""], ...] = ()

    assert Holder(values=[1.0, None]).values[1] is None
    with pytest.raises(af.ValidationError, match=r"^Holder\.strict\[1\]: .* got None"):
        Holder(values=[], strict=(1.0, None))


def test_a_64_bit_field_validates_what_conversion_stores_with_x64_on_or_off():
    class Precise(af.ArrayModule, check=True):
        x: Float64[Array, "n"]
        steps: Int64[Array, ""] = 0
        host: Float64[np.ndarray, ""] = 0.0

    with enable_x64(False):
        made = Precise(x=[1.0, 2.0])  # stored as float32 and int32, as JAX would
        assert made.x.dtype == jnp.float32 and made.steps.dtype == jnp.int32
        assert made.host.dtype == np.float64  # NumPy keeps its dtypes
        with pytest.raises(af.ValidationError, match=r"Precise\.x: .* \(shape \(\),"):
            Precise(x=1.0)  # shapes and the rest are still checked
    with enable_x64(True):
        made = Precise(x=[1.0, 2.0])
        assert made.x.dtype == jnp.float64 and made.steps.dtype == jnp.int64
