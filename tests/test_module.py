"""ArrayModule, af.field and af.normalize against the real equinox machinery."""

from __future__ import annotations

import dataclasses
import pickle
import warnings
from typing import ClassVar, Optional

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array, Float, Int

import arrayfield as af
from arrayfield._declare import field_converters
from helpers import run_code


class Scalars(af.ArrayModule):
    x: Float[Array, ""]
    n: Int[Array, ""] = 0
    flag: bool = True
    name: str = "star"
    data: np.ndarray = 1.5
    maybe: Optional[Float[Array, ""]] = None
    static_count: int = eqx.field(static=True, default=3)


def test_dataclass_init_converts_array_fields_only():
    m = Scalars(x=1)
    assert m.x.dtype == jnp.float32 and not m.x.weak_type
    assert m.n.dtype == jnp.int32
    assert type(m.data) is np.ndarray and m.data.dtype == np.float64
    assert m.flag is True and m.name == "star" and m.static_count == 3
    assert m.maybe is None


def test_arrays_that_are_already_right_are_stored_as_the_same_objects():
    x, n = jnp.zeros(()), jnp.zeros((), jnp.int32)
    data = np.zeros((), np.float32)
    m = Scalars(x=x, n=n, data=data)
    assert m.x is x and m.n is n and m.data is data


def test_weak_arrays_are_kept_and_wrong_dtype_arrays_are_fixed():
    weak = jnp.asarray(1.0)
    m = Scalars(x=weak, n=jnp.asarray(True))
    assert m.x is weak and m.x.weak_type  # an allowed dtype: stored as it is
    assert m.n.dtype == jnp.int32 and not m.n.weak_type


def test_none_keeps_the_leaf_count_of_plain_module():
    class Plain(eqx.Module):
        x: Optional[Float[Array, ""]]

    class Converted(af.ArrayModule):
        x: Optional[Float[Array, ""]]

    plain = jax.tree_util.tree_structure(Plain(None))
    converted = jax.tree_util.tree_structure(Converted(None))
    assert plain.num_leaves == converted.num_leaves == 0


def test_custom_init_is_converted_after_it_runs_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class Custom(af.ArrayModule):
            x: np.array

            def __init__(self, start):
                self.x = start
                assert self.x == start  # still the raw value inside __init__

    assert isinstance(Custom(0).x, np.ndarray)


def test_post_init_sees_raw_values_and_check_init_sees_arrays():
    seen = {}

    class Checked(af.ArrayModule):
        x: Float[Array, ""]

        def __post_init__(self):
            seen["post"] = type(self.x)

        def __check_init__(self):
            seen["check"] = type(self.x)

    Checked(1.0)
    assert seen["post"] is float
    assert issubclass(seen["check"], jax.Array)


def test_fields_declared_in_parents_and_child_with_own_init():
    class Parent(af.ArrayModule):
        a: Float[Array, "n"]

    class Child(Parent):
        b: Int[Array, ""]

        def __init__(self, a, b):
            self.a = a
            self.b = b

    child = Child([1, 2], 3)
    assert child.a.dtype == jnp.float32 and child.a.shape == (2,)
    assert child.b.dtype == jnp.int32


def test_subclass_without_fields_converts_inherited_ones_before_parent_checks():
    seen = []

    class Parent(af.ArrayModule):
        a: Float[Array, ""]

        def __check_init__(self):
            seen.append(type(self.a))

    class Leaf(Parent):
        pass

    class GrandChild(Leaf):
        b: Int[Array, ""] = 1

        def __check_init__(self):
            seen.append(type(self.b))

    assert Leaf(a=1).a.dtype == jnp.float32
    grandchild = GrandChild(a=2)
    assert grandchild.a.dtype == jnp.float32 and grandchild.b.dtype == jnp.int32
    assert all(issubclass(t, jax.Array) for t in seen) and len(seen) == 3


def test_fields_inherited_from_a_plain_module_are_converted():
    class Legacy(eqx.Module):
        a: Float[Array, ""]
        flag: int = 0

    class Modern(af.ArrayModule, Legacy):
        b: Float[Array, ""] = 2.0

    m = Modern(a=1)
    assert m.a.dtype == jnp.float32 and m.flag == 0
    assert [f.name for f in dataclasses.fields(Modern)] == ["a", "flag", "b"]
    assert Legacy(a=1).a == 1 and type(Legacy(a=1).a) is int  # parent untouched


def test_abstract_var_is_satisfied_by_a_converted_field():
    class Abstract(af.ArrayModule):
        size: eqx.AbstractVar[Float[Array, ""]]

    class Concrete(Abstract):
        size: Float[Array, ""]

    assert Concrete(size=2).size.dtype == jnp.float32
    with pytest.raises(TypeError):
        Abstract()


def test_class_variables_are_not_fields_and_are_left_alone():
    class WithClassVars(af.ArrayModule):
        scale: ClassVar[jax.Array] = 2.0
        x: Float[Array, ""]

    m = WithClassVars(x=1)
    assert WithClassVars.scale == 2.0 and type(WithClassVars.scale) is float
    assert [f.name for f in dataclasses.fields(m)] == ["x"]


def test_class_made_with_type():
    Dynamic = type("Dynamic", (af.ArrayModule,), {"__annotations__": {"x": jax.Array}})
    assert Dynamic(x=3).x.dtype == jnp.int32


def test_user_converter_runs_first():
    class Doubled(af.ArrayModule):
        x: Float[Array, ""] = eqx.field(converter=lambda v: v * 2)

    result = Doubled(x=2)
    assert result.x.dtype == jnp.float32 and result.x == 4


def test_eqx_field_options_are_kept():
    class Options(af.ArrayModule):
        x: Float[Array, ""] = eqx.field(default=1, repr=False)

    assert Options().x.dtype == jnp.float32
    assert "x=" not in repr(Options())


def test_static_array_annotated_field_is_left_alone():
    class Static(af.ArrayModule):
        shape: jax.Array = eqx.field(static=True)

    assert Static(shape=(2, 3)).shape == (2, 3)


def test_error_names_class_field_annotation_and_value():
    with pytest.raises(af.ConversionError) as info:
        Scalars(x=1, n=1.5)
    message = str(info.value)
    assert "Scalars.n" in message and "Int[Array, '']" in message and "1.5" in message
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


def test_string_annotations_from_future_import_resolve():
    # this module uses `from __future__ import annotations`
    assert isinstance(Scalars.__annotations__["x"], str)
    assert Scalars(x=2).x.dtype == jnp.float32


class Scene(af.ArrayModule):
    sources: list[Source]
    gain: Float[Array, ""] = 1.0


class Source(af.ArrayModule):  # defined after Scene: a forward reference
    flux: Float[Array, ""]
    parent: Optional[Later] = None


class Later(af.ArrayModule):
    value: Float[Array, ""]


def test_forward_references_resolve_lazily_once_per_class():
    converter = field_converters(Source)["parent"]
    scene = Scene(sources=[Source(flux=1, parent=Later(value=2))])
    assert scene.sources[0].parent.value.dtype == jnp.float32
    assert converter.resolved_spec() is converter.resolved_spec()


def test_unresolvable_annotation_warns_and_leaves_the_field():
    class Unknown(af.ArrayModule):
        x: NotImportedAtRuntime

    with pytest.warns(af.AnnotationWarning, match=r"Unknown\.x") as caught:
        assert Unknown(x=1).x == 1
    assert caught[0].filename == __file__  # the line that built it, not ours


# -- af.field ---------------------------------------------------------------------


def test_af_field_opts_a_plain_module_field_in():
    class Plain(eqx.Module):
        x: Float[Array, ""] = af.field()
        y: Float[Array, ""] = 1.0

    p = Plain(x=1)
    assert p.x.dtype == jnp.float32 and p.y == 1.0 and type(p.y) is float


def test_af_field_convert_false_opts_out():
    class FFT(af.ArrayModule):
        shape: jnp.array = af.field(convert=False)
        kernel: jnp.array = 0.0

    fft = FFT(shape=[64, 64])
    assert fft.shape == [64, 64] and isinstance(fft.kernel, jax.Array)


def test_af_field_dtype_overrides_the_annotation():
    class Override(af.ArrayModule):
        x: Float[Array, ""] = af.field(dtype=jnp.float16)

    class PlainOverride(eqx.Module):
        x: jax.Array = af.field(dtype="int8")

    assert Override(x=1).x.dtype == jnp.float16
    assert PlainOverride(x=3).x.dtype == jnp.int8


def test_af_field_dtype_with_static_or_opt_out_is_an_error():
    with pytest.raises(TypeError, match="dtype"):
        af.field(dtype=jnp.float32, convert=False)
    with pytest.raises(TypeError, match="dtype"):
        af.field(dtype=jnp.float32, static=True)


def test_af_field_dtype_on_non_array_annotation_is_an_error():
    # Raised as itself on every Python, not in the RuntimeError that Python < 3.12
    # makes of errors raised in __set_name__.
    with pytest.raises(af.ConversionError) as info:

        class Bad(eqx.Module):
            x: int = af.field(dtype=jnp.float32)

    assert type(info.value) is af.ConversionError
    assert "Bad.x" in str(info.value)
    assert "does not denote an array" in str(info.value)


def test_af_field_passes_converter_and_kwargs_to_eqx_field():
    class Plain(eqx.Module):
        x: Float[Array, ""] = af.field(converter=lambda v: v + 1, default=1)

    assert Plain().x == 2 and Plain().x.dtype == jnp.float32


# -- normalize ---------------------------------------------------------------------


def test_normalize_reconverts_after_tree_at():
    m = eqx.tree_at(lambda s: s.x, Scalars(x=1), 5)
    assert m.x == 5 and type(m.x) is int
    normalized = af.normalize(m)
    assert normalized.x.dtype == jnp.float32 and normalized.x == 5


def test_normalize_is_idempotent_and_returns_the_same_objects():
    tree = {"scene": [Scalars(x=1), Scalars(x=2)], "lr": 0.1}
    once = af.normalize(tree)
    assert once["scene"][0] is tree["scene"][0]  # nothing to do: same object
    edited = eqx.tree_at(lambda t: t["scene"][1].n, tree, 7)
    fixed = af.normalize(edited)
    assert fixed["scene"][1].n.dtype == jnp.int32
    assert af.normalize(fixed)["scene"][1] is fixed["scene"][1]
    assert fixed["lr"] == 0.1  # plain leaves outside modules are untouched


def test_normalize_after_tree_unflatten_and_in_nested_modules():
    class Outer(af.ArrayModule):
        inner: Scalars
        scale: Float[Array, ""]

    outer = Outer(inner=Scalars(x=1), scale=2)
    leaves, treedef = jax.tree_util.tree_flatten(outer)
    rebuilt = jax.tree_util.tree_unflatten(treedef, [1 for _ in leaves])
    normalized = af.normalize(rebuilt)
    assert normalized.inner.x.dtype == jnp.float32
    assert normalized.scale.dtype == jnp.float32
    assert type(normalized.inner.data) is np.ndarray


def test_normalize_does_not_rerun_user_converters():
    class Doubled(af.ArrayModule):
        x: Float[Array, ""] = eqx.field(converter=lambda v: v * 2)

    assert af.normalize(Doubled(x=1)).x == 2


def test_public_names_all_resolve_and_diagnostics_load_lazily():

    assert sorted(af.__all__) == sorted(set(af.__all__))
    for name in af.__all__:
        assert getattr(af, name) is not None
    code = (
        "import sys, arrayfield as af\n"
        "assert 'arrayfield.diagnostics._retrace' not in sys.modules\n"
        "af.explain_retraces\n"
        "assert 'arrayfield.diagnostics._retrace' in sys.modules\n"
    )
    result = run_code(code)
    assert result.returncode == 0, result.stderr


def test_errors_spell_legacy_function_annotations_with_their_module():
    class Legacy(af.ArrayModule):
        host: np.array
        device: jnp.array

    with pytest.raises(af.ConversionError, match=r"Legacy\.host: .* np\.array"):
        Legacy(host="a", device=0)
    with pytest.raises(af.ConversionError, match=r"annotated jnp\.array:"):
        Legacy(host=0, device="a")


def _check_init_hooks(cls: type) -> list:
    """The `__check_init__` hooks equinox calls, walked as quax's fast path does."""
    return [
        k.__dict__["__check_init__"]
        for k in cls.__mro__
        if "__check_init__" in k.__dict__
    ]


def test_conversion_adds_no_check_init_hook_to_the_mro():
    def make(base: type) -> tuple[type, type]:
        class Plain(base):
            x: Float[Array, ""]

        class Checked(base):
            x: Float[Array, ""]

            def __check_init__(self):
                assert isinstance(self.x, jax.Array) or base is eqx.Module

        class Derived(Checked):
            y: Int[Array, ""] = 0

        return Plain, Checked, Derived

    for ours, theirs in zip(make(af.ArrayModule), make(eqx.Module), strict=True):
        assert len(_check_init_hooks(ours)) == len(_check_init_hooks(theirs))
    plain, checked, derived = make(af.ArrayModule)
    assert plain(x=1).x.dtype == jnp.float32
    assert checked(x=1).x.dtype == jnp.float32
    assert derived(x=1).y.dtype == jnp.int32


def test_check_true_adds_a_hook_only_to_a_class_without_its_own():
    class Own(af.ArrayModule, check=True):
        x: Float[Array, ""]

        def __check_init__(self):
            pass

    class Bare(af.ArrayModule, check=True):
        x: Float[Array, ""]

    assert len(_check_init_hooks(Own)) == 1 and len(_check_init_hooks(Bare)) == 1
    with pytest.raises(af.ValidationError, match=r"Own\.x"):
        Own(x=jnp.zeros(3))


def test_classes_are_still_converted_after_the_module_is_reloaded():
    # What IPython's autoreload does when _module.py changes on disk.
    code = (
        "import importlib, jax.numpy as jnp\n"
        "from jaxtyping import Array, Float\n"
        "import arrayfield as af, arrayfield._module as m\n"
        "old = af.ArrayModule\n"
        "importlib.reload(m)\n"
        "class A(old):\n"
        "    x: Float[Array, '']\n"
        "class B(m.ArrayModule):\n"
        "    x: Float[Array, '']\n"
        "class C(old, chek=True):\n"
        "    x: Float[Array, '']\n"
    )
    result = run_code(code)
    assert "unknown class keyword chek=True" in result.stderr, result.stderr
    code = code.rsplit("class C", 1)[0] + (
        "assert A(x=1).x.dtype == jnp.float32, type(A(x=1).x)\n"
        "assert B(x=1).x.dtype == jnp.float32, type(B(x=1).x)\n"
    )
    result = run_code(code)
    assert result.returncode == 0, result.stderr


def test_a_main_module_class_pickles_by_value_with_cloudpickle(tmp_path):
    # A notebook's or script's class, sent to a Dask, Ray or loky worker: the
    # worker's __main__ is another module, so cloudpickle pickles the class too.
    blob = tmp_path / "scene.pkl"
    send = (
        "import cloudpickle\n"
        "from jaxtyping import Array, Float\n"
        "import arrayfield as af\n"
        "class Scene(af.ArrayModule, check=True):\n"
        "    flux: Float[Array, 'n']\n"
        "    gain: Float[Array, ''] = af.field(default=2)\n"
        f"open({str(blob)!r}, 'wb').write(cloudpickle.dumps(Scene(flux=[1.0, 2.0])))\n"
    )
    result = run_code(send)
    assert result.returncode == 0, result.stderr
    receive = (
        "import pickle, jax.numpy as jnp\n"
        f"scene = pickle.loads(open({str(blob)!r}, 'rb').read())\n"
        "assert type(scene).__name__ == 'Scene'\n"
        "assert scene.flux.dtype == jnp.float32 and scene.flux.tolist() == [1, 2]\n"
        "assert scene.gain.dtype == jnp.float32 and scene.gain == 2\n"
    )
    result = run_code(receive)
    assert result.returncode == 0, result.stderr


def test_a_local_class_and_its_instances_round_trip_through_cloudpickle():
    cloudpickle = pytest.importorskip("cloudpickle")

    def make() -> type:
        class Local(af.ArrayModule):
            x: Float[Array, ""]
            later: Optional["Float[Array, '']"] = None  # resolved on first use

        return Local

    local = make()
    copied = pickle.loads(cloudpickle.dumps(local))
    assert copied(x=1, later=2).later.dtype == jnp.float32
    instance = pickle.loads(cloudpickle.dumps(local(x=1)))
    assert instance.x.dtype == jnp.float32


@pytest.mark.parametrize(
    ("undo", "broken"),
    [
        (  # no converter declared
            "import arrayfield._declare as m; m.declare_array_fields = lambda c: None",
            "a list given to an array field was not stored converted",
        ),
        (  # declared, but its result not stored (validation still runs)
            "import arrayfield._field as m; "
            "m.FieldConverter.__call__ = lambda self, value: value",
            "a list given to an array field was not stored converted",
        ),
        (  # no validation
            "import arrayfield._validate as m; m.validate = lambda self: None",
            "a check=True class accepted a wrongly shaped array",
        ),
    ],
    ids=["no converter", "converter not run", "no validation"],
)
def test_import_fails_naming_versions_when_equinox_stops_running_our_hooks(
    undo, broken
):
    # An equinox that no longer runs the converters, or the __check_init__, that
    # ArrayModule declares is what the import-time check exists for; undoing the
    # declaration, the conversion or the check before ArrayModule loads has the
    # same effect on any equinox. ArrayModule must refuse to load, never convert
    # or validate silently less.
    code = (
        f"{undo}\n"
        "import arrayfield as af\n"
        "try:\n"
        "    af.ArrayModule\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    result = run_code(code)
    assert result.returncode == 0, result.stderr
    assert f"equinox {eqx.__version__} and jax {jax.__version__}" in result.stdout
    assert broken in result.stdout


def test_equinox_classes_keep_their_own_methods_after_arrayfield_is_used():
    # Nothing of equinox's is replaced for the process: after defining classes
    # (check=True too) and running every diagnostic, with every block closed,
    # each equinox class's namespace holds the objects it held before.
    code = """
import inspect, sys
import equinox as eqx, jax.numpy as jnp
from jaxtyping import Array, Float

def namespaces():
    found = {}
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] != "equinox":
            continue
        for value in list(vars(module).values()):
            if inspect.isclass(value) and value.__module__.startswith("equinox"):
                for cls in (value, type(value)):
                    found[cls] = dict(vars(cls))
    return found

before = namespaces()
import arrayfield as af

class Star(af.ArrayModule, check=True):
    flux: Float[Array, ""]
    n: int = 0

@eqx.filter_jit
def plain(star):
    return star.flux * 2

@af.explain_retraces
@eqx.filter_jit
def watched(star):
    return star.flux + star.n

star = Star(flux=1.0)
af.audit(star)
af.normalize(star)
with af.explain_retraces():
    plain(star)
    af.filter_jit(lambda s: s.flux)(star)
watched(star)
watched(Star(flux=2.0, n=1))
changed = [
    f"{cls.__qualname__}.{key}"
    for cls, names in before.items()
    for key in names.keys() | vars(cls).keys()
    if names.get(key, None) is not vars(cls).get(key, None)
]
print(sorted(changed))
"""
    result = run_code(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
