"""Edge cases a review of the core turned up, each pinned by the rule it checks."""

from __future__ import annotations

import sys
import types
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Float, Float16, Float64, Int64, Key

import arrayfield as af


def _module_from_source(name: str, source: str, monkeypatch) -> types.ModuleType:
    """A real, importable module (so classes get `__module__ == name`)."""
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


def test_custom_init_that_leaves_a_defaulted_array_field_unset_converts_the_default():
    # eqx.Module accepts this: the class attribute is the default.
    class Scaled(af.ArrayModule):
        x: Float[Array, ""]
        scale: Float[Array, ""] = 1.0

        def __init__(self, x):
            self.x = x

    scaled = Scaled(2)
    assert isinstance(scaled.scale, jax.Array)
    assert scaled.scale.dtype == jnp.float32 and not scaled.scale.weak_type


def test_subclass_of_custom_init_module_with_new_defaulted_array_field_constructs():
    # The realistic form: extending eqx.nn.Linear (custom __init__) with a parameter.
    class ScaledLinear(eqx.nn.Linear, af.ArrayModule):
        scale: Float[Array, ""] = 1.0

    layer = ScaledLinear(2, 3, key=jax.random.key(0))
    assert isinstance(layer.scale, jax.Array) and layer.scale.dtype == jnp.float32


def test_prng_key_field_accepts_new_style_keys_on_every_instance():
    # Key arrays have no `.weak_type`: they must stay off the arrays fast path,
    # which would otherwise fail on the second key.
    class Sampler(af.ArrayModule):
        key: Key[Array, ""]
        other: jax.Array

    first = jax.random.key(0)
    a = Sampler(key=first, other=jax.random.key(1))
    b = Sampler(key=jax.random.key(2), other=jax.random.key(3))
    assert a.key is first
    assert jax.dtypes.issubdtype(b.key.dtype, jax.dtypes.prng_key)


def test_64bit_exact_field_under_x64_off_never_silently_changes_a_value():
    # Without x64 an Int64 field holds an int32 array: a value that does not fit
    # is an error, never a silent wrap to 0.
    assert not jax.config.jax_enable_x64

    class Wide(af.ArrayModule):
        count: Int64[Array, ""]

    try:
        wide = Wide(count=2**40)
    except af.ConversionError as error:
        assert "Wide.count" in str(error)
    else:
        assert int(wide.count) == 2**40


def test_int_overflowing_float16_field_raises_conversion_error_under_error_filter():
    # With `-W error` (common in test suites) NumPy's cast warning escapes instead
    # of the ConversionError; without it the RuntimeWarning leaks to the user.
    class Half(af.ArrayModule):
        x: Float16[Array, ""]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(af.ConversionError, match=r"Half\.x"):
            Half(x=70000)


def test_jax_array_stored_in_numpy_field_passes_check_true_validation():
    # README: for np.ndarray annotations "a JAX array passed in stays a JAX array";
    # validation must accept what conversion chose to keep.
    class Table(af.ArrayModule, check=True):
        column: Float[np.ndarray, "n"]

    table = Table(column=jnp.ones(2))
    assert table.column.shape == (2,)


def test_af_field_from_a_helper_module_resolves_annotations_in_the_class_module(
    monkeypatch,
):
    # A project-wide field factory is a common pattern; the string annotation must
    # be resolved in the class's module (as typing.get_type_hints does), not in the
    # module that happened to call af.field.
    _module_from_source(
        "rv_field_helpers",
        "import arrayfield as af\n"
        "def array_field(**kwargs):\n"
        "    return af.field(**kwargs)\n",
        monkeypatch,
    )
    user = _module_from_source(
        "rv_field_user",
        "from __future__ import annotations\n"
        "import equinox as eqx\n"
        "import jax.numpy as jnp\n"
        "from jaxtyping import Array, Float\n"
        "from rv_field_helpers import array_field\n"
        "class Star(eqx.Module):\n"
        "    flux: Float[Array, ''] = array_field()\n"
        "    width: Float[Array, ''] = array_field(dtype=jnp.float16, default=1)\n",
        monkeypatch,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", af.AnnotationWarning)
        star = user.Star(flux=2)
    assert isinstance(star.flux, jax.Array) and star.flux.dtype == jnp.float32
    assert isinstance(star.width, jax.Array) and star.width.dtype == jnp.float16


def test_type_checking_only_non_array_annotation_is_left_alone_without_warning(
    monkeypatch,
):
    # `cfg: Config` with Config imported only under TYPE_CHECKING (circular
    # imports) is not an array field; warning "this field is not converted" and
    # "import it at runtime" on every such class is noise, and an error under -W.
    _module_from_source(
        "rv_config_mod",
        "import equinox as eqx\nclass Config(eqx.Module):\n    depth: int = 1\n",
        monkeypatch,
    )
    user = _module_from_source(
        "rv_tc_user",
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "from jaxtyping import Array, Float\n"
        "import arrayfield as af\n"
        "if TYPE_CHECKING:\n"
        "    from rv_config_mod import Config\n"
        "class Layer(af.ArrayModule):\n"
        "    weight: Float[Array, '']\n"
        "    cfg: Config\n",
        monkeypatch,
    )
    config = sys.modules["rv_config_mod"].Config()
    with warnings.catch_warnings():
        warnings.simplefilter("error", af.AnnotationWarning)
        layer = user.Layer(weight=1, cfg=config)
    assert layer.cfg is config and layer.weight.dtype == jnp.float32


def test_array_already_stored_in_a_64bit_field_without_x64_is_kept_as_is():
    # Without x64 a Float64 field holds float32; passing that array back in must
    # keep it (same object), not copy it to the host to check it against float64.
    assert not jax.config.jax_enable_x64

    class Wide(af.ArrayModule):
        d: Float64[Array, "n"]

    stored = Wide(d=np.ones(3)).d
    assert stored.dtype == jnp.float32
    assert Wide(d=stored).d is stored


def test_jax_array_in_a_64bit_numpy_field_without_x64_is_kept_without_warnings():
    class Host(af.ArrayModule):
        a: Float64[np.ndarray, "2"]

    on_device = jnp.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Host(a=on_device).a is on_device
    assert Host(a=[1.0, 2.0]).a.dtype == np.float64  # NumPy input stays 64-bit


def test_a_subclass_property_may_override_an_inherited_array_field():
    # equinox allows a property in a subclass to replace a field.
    class Parent(af.ArrayModule):
        x: Float[Array, ""]
        y: Float[Array, ""]

        def __init__(self, y):
            self.y = y

    class Child(Parent):
        @property
        def x(self):
            return 2.0

    child = Child(1.0)
    assert child.x == 2.0 and child.y.dtype == jnp.float32
