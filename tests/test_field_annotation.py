"""`af.Field[T]` is `T` at runtime: everything that reads annotations sees `T`."""

import dataclasses
import importlib
import re
import sys
import textwrap
import typing
import warnings

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
from beartype import beartype
from jaxtyping import Array, Float, Int, TypeCheckError, jaxtyped

import arrayfield as af


@pytest.mark.parametrize(
    "annotation",
    [Float[Array, ""], Int[np.ndarray, "n"], Array, Float[Array, "n"] | None, "Array"],
)
def test_field_of_an_annotation_is_that_annotation(annotation):
    assert af.Field[annotation] is annotation


def test_field_takes_exactly_one_annotation():
    with pytest.raises(TypeError, match="Field takes one annotation"):
        af.Field[Array, Array]  # pyright: ignore[reportInvalidTypeArguments]


def test_field_is_not_a_value():
    with pytest.raises(TypeError, match="only an annotation"):
        af.Field()


class Scene(af.ArrayModule):
    x: af.Field[Float[Array, ""]]
    steps: af.Field[Int[Array, ""]] = af.field(default=0)


class BareScene(af.ArrayModule):
    x: Float[Array, ""]
    steps: Int[Array, ""] = af.field(default=0)


def test_fields_convert_exactly_as_with_the_bare_annotation():
    scene, bare = Scene(x=1, steps=2), BareScene(x=1, steps=2)
    for name in ("x", "steps"):
        ours, theirs = getattr(scene, name), getattr(bare, name)
        assert (ours.dtype, ours.weak_type) == (theirs.dtype, theirs.weak_type)
    # jaxtyping makes a new class per subscript: compare what they name.
    assert [repr(f.type) for f in dataclasses.fields(Scene)] == [
        repr(f.type) for f in dataclasses.fields(BareScene)
    ]


def _import(tmp_path, monkeypatch, name, source, hook=False):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    if not hook:
        return importlib.import_module(name)
    from jaxtyping import install_import_hook

    with install_import_hook(name, "beartype.beartype"):
        return importlib.import_module(name)


FUTURE_SOURCE = """
    from __future__ import annotations

    from jaxtyping import Array, Float
    import arrayfield as af

    class Star(af.ArrayModule):
        flux: af.Field[Float[Array, ""]]
        pos: af.Field[Float[Array, "2"]]
"""


def test_string_annotations_resolve_in_the_module_namespace(tmp_path, monkeypatch):
    module = _import(tmp_path, monkeypatch, "future_stars", FUTURE_SOURCE)
    star = module.Star(flux=1, pos=[0, 1])
    assert star.flux.dtype == jnp.float32 and not star.flux.weak_type
    assert repr(typing.get_type_hints(module.Star)["pos"]) == repr(Float[Array, "2"])


@pytest.mark.parametrize("future", [False, True])
def test_import_hook_accepts_scalars_and_checks_shapes(tmp_path, monkeypatch, future):
    source = FUTURE_SOURCE if future else FUTURE_SOURCE.replace("from __future", "#")
    name = f"hooked_field_stars_{future}"
    module = _import(tmp_path, monkeypatch, name, source, hook=True)
    assert module.Star(flux=1, pos=[0.5, 1.5]).flux.dtype == jnp.float32
    with pytest.raises(TypeCheckError):
        module.Star(flux=1, pos=jnp.zeros(3))


@jaxtyped(typechecker=beartype)
class Pair(af.ArrayModule):
    a: af.Field[Float[Array, "n"]]
    b: af.Field[Float[Array, "n"]]


def test_jaxtyped_class_accepts_scalars_and_checks_named_dimensions():
    assert Pair(a=[1.0, 2.0], b=jnp.zeros(2)).a.dtype == jnp.float32
    with pytest.raises(TypeCheckError):
        Pair(a=jnp.zeros(2), b=jnp.zeros(3))
    with pytest.raises(TypeCheckError):
        Pair(a="ab", b=jnp.zeros(2))


class Catalogue(af.ArrayModule, check=True):
    flux: af.Field[Float[Array, "C"]]
    index: af.Field[Int[Array, "C"]]


def test_validation_reads_the_annotation_inside():
    Catalogue(flux=[1.0, 2.0], index=[0, 1])
    with pytest.raises(af.ValidationError, match=r"Catalogue.index: expected Int"):
        Catalogue(flux=[1.0, 2.0], index=[0, 1, 2])


def test_conversion_error_names_the_annotation_inside():
    with pytest.raises(af.ConversionError, match=r"annotated Float\[Array, ''\]"):
        Scene(x="bright")


def test_normalize_converts_a_field_set_without_init():
    scene = eqx.tree_at(lambda s: s.x, Scene(x=0), 5)
    assert af.normalize(scene).x.dtype == jnp.float32


def test_serialise_round_trip(tmp_path):
    eqx.tree_serialise_leaves(tmp_path / "scene.eqx", Scene(x=1.5, steps=3))
    loaded = eqx.tree_deserialise_leaves(tmp_path / "scene.eqx", Scene(x=0))
    assert float(loaded.x) == 1.5 and int(loaded.steps) == 3
    assert loaded.steps.dtype == jnp.int32


class PlainScene(eqx.Module):  # no conversion: the diagnostics must say so
    x: af.Field[Float[Array, ""]]


class BarePlainScene(eqx.Module):
    x: Float[Array, ""]


def _same_message(ours: str, theirs: str) -> bool:
    """Whether a PlainScene message is BarePlainScene's: the class and the line
    that declares the field (`file.py:N`) are the only differences."""
    ours = ours.replace("PlainScene", "BarePlainScene")
    return re.sub(r"\.py:\d+", ".py:N", ours) == re.sub(r"\.py:\d+", ".py:N", theirs)


def test_audit_names_the_field_and_annotation_as_for_the_bare_annotation():
    ours, theirs = af.audit(PlainScene(x=1.0)), af.audit(BarePlainScene(x=1.0))
    assert [f.path for f in ours] == [f.path for f in theirs] == ["tree.x"]
    assert _same_message(str(ours), str(theirs))
    assert "annotated Float[Array, '']" in str(ours)


def _retrace_messages(cls):
    @af.explain_retraces
    @eqx.filter_jit
    def read(scene):
        return scene.x

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read(cls(x=1))
        read(cls(x=2))
    return [str(w.message) for w in caught if w.category is af.RetraceWarning]


def test_explain_retraces_names_the_field_as_for_the_bare_annotation():
    ours, theirs = _retrace_messages(PlainScene), _retrace_messages(BarePlainScene)
    assert len(ours) == 1 and "scene.x: 1 -> 2" in ours[0]
    assert "PlainScene.x is annotated Float[Array, '']" in ours[0]
    assert _same_message(ours[0].split("\n", 1)[1], theirs[0].split("\n", 1)[1])
