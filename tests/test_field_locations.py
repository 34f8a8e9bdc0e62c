"""Diagnostics name the class and line that declare a field, print every value
on one line, and give ints (shapes, sizes, ids) static advice, not arrays."""

from __future__ import annotations

import inspect
import warnings

import equinox as eqx
import jax.numpy as jnp

import arrayfield as af


def _line_of(cls: type, text: str) -> int:
    lines, start = inspect.getsourcelines(cls)
    return start + next(i for i, line in enumerate(lines) if text in line)


class Base(eqx.Module):
    n: float


class Sersic(Base):
    size: int
    label: object


class Wcs:
    def __repr__(self) -> str:
        return "Wcs(\n    pixel_scale=0.2,\n    origin=(0, 0),\n)"


def test_audit_names_the_declaring_class_and_line_of_inherited_fields():
    findings = {f.path: f for f in af.audit(Sersic(1.5, 4, Wcs()), name="m")}

    n_line = _line_of(Base, "n: float")
    assert findings["m.n"].field == f"Base.n (test_field_locations.py:{n_line})"
    assert findings["m.n"].hint.endswith(
        f"(declared as Base.n, test_field_locations.py:{n_line})"
    )
    size_line = _line_of(Sersic, "size: int")
    assert findings["m.size"].field == (
        f"Sersic.size (test_field_locations.py:{size_line})"
    )


def test_audit_prints_multi_line_reprs_on_one_line():
    report = str(af.audit(Sersic(1.5, 4, Wcs()), name="m"))
    (line,) = [line for line in report.splitlines() if line.startswith("  m.label")]
    assert line.startswith("  m.label = Wcs( pixel_scale=0.2, origin=(0, 0), ):")


def test_int_fields_get_static_advice_not_pass_an_array():
    hint = {f.path: f.hint for f in af.audit(Sersic(1.5, 4, Wcs()), name="m")}["m.size"]
    assert (
        "if it is a shape, size or id that stays fixed, declare it "
        "eqx.field(static=True)"
    ) in hint
    assert "pass an array" not in hint
    assert "jnp.asarray" not in hint


def test_explain_retraces_names_the_declaring_class_and_line():
    @eqx.filter_jit
    def scale(model, x):
        return model.n * x

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            scale(Sersic(1.5, 4, None), jnp.ones(2))
            scale(Sersic(2.5, 4, None), jnp.ones(2))
    messages = [
        str(w.message) for w in caught if isinstance(w.message, af.RetraceWarning)
    ]
    (message,) = messages
    n_line = _line_of(Base, "n: float")
    assert f"(declared as Base.n, test_field_locations.py:{n_line})" in message


def test_a_class_made_per_call_is_named_as_the_structure_change():
    def make(value):
        cls = type("Parameters", (af.ArrayModule,), {"__annotations__": {"a": float}})
        return cls(a=value)

    @eqx.filter_jit
    def double(parameters):
        return parameters.a * 2

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with af.explain_retraces():
            double(make(1.0))
            double(make(1.0))
    (message,) = [
        str(w.message) for w in caught if isinstance(w.message, af.RetraceWarning)
    ]
    assert "same class names, different class objects" in message
    assert "make each class once" in message
