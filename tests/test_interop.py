"""arrayfield with the rest of the JAX ecosystem: jaxtyping checks, serialisation,
transforms, optax."""

import dataclasses
import importlib
import sys
import textwrap

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
import pytest
from beartype import beartype
from jaxtyping import Array, Float, Int, jaxtyped

import arrayfield as af


@jaxtyped(typechecker=beartype)
class Checked(af.ArrayModule):
    x: Float[Array, "n"]
    y: Float[Array, "n"]
    scale: Float[Array, ""] = 1.0


def test_jaxtyped_class_accepts_scalars_for_array_fields():
    m = Checked(x=[1.0, 2.0], y=jnp.zeros(2), scale=3)
    assert m.scale.dtype == jnp.float32


def test_jaxtyped_class_still_rejects_wrong_types_and_shapes():
    with pytest.raises(Exception, match="Type-check error"):
        Checked(x="ab", y=jnp.zeros(2))
    with pytest.raises(Exception, match="Type-check error"):
        Checked(x=jnp.zeros(2), y=jnp.zeros(3))
    with pytest.raises(Exception, match="Type-check error"):
        Checked(x=jnp.zeros(2), y=jnp.zeros(2), scale=jnp.zeros(2))


def test_import_hook_accepts_scalars(tmp_path, monkeypatch):
    source = textwrap.dedent(
        """
        from jaxtyping import Array, Float
        import arrayfield as af

        class Star(af.ArrayModule):
            flux: Float[Array, ""]
            pos: Float[Array, "2"]
        """
    )
    (tmp_path / "hooked_stars.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    from jaxtyping import install_import_hook

    with install_import_hook("hooked_stars", "beartype.beartype"):
        module = importlib.import_module("hooked_stars")
    try:
        assert module.Star(flux=1, pos=jnp.zeros(2)).flux.dtype == jnp.float32
        with pytest.raises(Exception, match="Type-check error"):
            module.Star(flux=1, pos=jnp.zeros(3))
    finally:
        sys.modules.pop("hooked_stars", None)


class Star(af.ArrayModule):
    flux: Float[Array, ""]
    count: Int[Array, ""] = 0


def test_dataclasses_replace_converts():
    star = dataclasses.replace(Star(flux=1), flux=2)
    assert star.flux.dtype == jnp.float32 and star.flux == 2


def test_serialise_round_trip(tmp_path):
    star = Star(flux=1.5, count=3)
    eqx.tree_serialise_leaves(tmp_path / "star.eqx", star)
    loaded = eqx.tree_deserialise_leaves(tmp_path / "star.eqx", Star(flux=0))
    assert loaded.flux == 1.5 and loaded.count == 3
    assert loaded.flux.dtype == jnp.float32 and loaded.count.dtype == jnp.int32


def test_vmap_over_constructor():
    stars = jax.vmap(lambda f: Star(flux=f))(jnp.arange(3.0))
    assert stars.flux.shape == stars.count.shape == (3,)  # vmap stacks every output
    stars = eqx.filter_vmap(lambda f: Star(flux=f, count=1))(jnp.arange(3.0))
    assert stars.flux.shape == (3,)


def test_grad_with_respect_to_converted_fields():
    class Flux(af.ArrayModule):
        value: Float[Array, ""]

    grads = jax.grad(lambda s: s.value**2)(Flux(value=3))
    assert grads.value == 6.0
    grads = eqx.filter_grad(lambda s: s.flux**2 * s.count)(Star(flux=2, count=3))
    assert grads.flux == 12.0 and grads.count is None  # ints are not differentiated


def test_construction_inside_jit_and_eval_shape():
    @jax.jit
    def build(x):
        return Star(flux=x, count=1)

    assert build(2.0).flux == 2.0
    shape = jax.eval_shape(lambda x: Star(flux=x), 1.0)
    assert shape.flux.shape == ()


def test_scan_carrying_a_module():
    def body(star, _):
        return Star(flux=star.flux + 1, count=star.count + 1), None

    final, _ = jax.lax.scan(body, Star(flux=0), None, length=5)
    assert final.flux == 5 and final.count == 5


def test_plain_jax_jit_and_filter_jit_trace_once():
    traces = []

    def step(star):
        traces.append(1)
        return Star(flux=star.flux + 1, count=star.count)

    jitted, filtered = jax.jit(step), eqx.filter_jit(step)
    star_a = star_b = Star(flux=0)
    for _ in range(10):
        star_a, star_b = jitted(star_a), filtered(star_b)
    assert len(traces) == 2  # one each
    assert star_a.flux == star_b.flux == 10


def test_optax_fit_loop_traces_once():
    class Model(af.ArrayModule):
        amplitude: Float[Array, ""]
        offset: Float[Array, ""]

    optimiser = optax.adam(0.1)
    model = Model(amplitude=1, offset=0)
    state = optimiser.init(eqx.filter(model, eqx.is_array))
    traces = []

    @eqx.filter_jit
    def step(model, state):
        traces.append(1)
        loss, grads = eqx.filter_value_and_grad(
            lambda m: (m.amplitude * 2.0 + m.offset - 3.0) ** 2
        )(model)
        updates, state = optimiser.update(grads, state)
        return eqx.apply_updates(model, updates), state, loss

    for _ in range(50):
        model, state, loss = step(model, state)
    assert len(traces) == 1
    assert float(loss) < 1.0
