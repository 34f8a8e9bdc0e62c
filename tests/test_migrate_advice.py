"""Advice `arrayfield migrate` gives that is safe to follow blindly (issue 21).

AF005 stays silent on values that are pytrees (they are flattened, not hashed)
and says "may be" for classes it cannot see; AF002 sees a field used as a shape
through keywords, positional shape arguments, subscripts and helpers returning
a list of ints; AF007 reports numeric constants that become trainable. Each
test writes a small project and runs the CLI in a subprocess; where the advice
promises a runtime effect, the migrated code runs under jit.
"""

from __future__ import annotations

import pytest

from helpers import run_code
from migrate_helpers import codes, migrate, write_tree

SOURCE_LIST = """\
import equinox as eqx
import jax


class SourceList(list):
    pass


jax.tree_util.register_pytree_node(
    SourceList, lambda sl: (list(sl), None), lambda aux, ch: SourceList(ch)
)


class Scene(eqx.Module):
    sources: list

    def __init__(self):
        self.sources = SourceList()
"""


def test_a_registered_pytree_node_is_no_af005(tmp_path):
    write_tree(tmp_path, {"scene.py": SOURCE_LIST})
    assert codes(migrate(tmp_path, "--check", ".")) == []


def test_the_same_class_unregistered_is_af005(tmp_path):
    unregistered = SOURCE_LIST.replace("jax.tree_util.register_pytree_node(", "print(")
    write_tree(tmp_path, {"scene.py": unregistered})
    assert codes(migrate(tmp_path, "--check", ".")) == [
        "scene.py:15 AF005 Scene.sources"
    ]


def test_a_registration_in_another_module_is_found(tmp_path):
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "from . import registry\n",
            "pkg/containers.py": "class SourceList(list):\n    pass\n",
            "pkg/registry.py": """\
                import jax

                from .containers import SourceList

                jax.tree_util.register_pytree_node(
                    SourceList, lambda s: (list(s), None), lambda a, c: SourceList(c)
                )
                """,
            "pkg/scene.py": """\
                import equinox as eqx

                from .containers import SourceList


                class Scene(eqx.Module):
                    sources: list

                    def __init__(self):
                        self.sources = SourceList()
                """,
        },
    )
    assert codes(migrate(tmp_path, "--check", ".")) == []


def test_decorated_pytree_classes_and_modules_are_no_af005(tmp_path):
    write_tree(
        tmp_path,
        {
            "scene.py": """\
                import equinox as eqx
                from jax.tree_util import register_pytree_node_class


                @register_pytree_node_class
                class Pair:
                    def __init__(self, a, b):
                        self.a, self.b = a, b

                    def tree_flatten(self):
                        return (self.a, self.b), None

                    @classmethod
                    def tree_unflatten(cls, aux, children):
                        return cls(*children)


                class Inner(eqx.Module):
                    w: float


                class Scene(eqx.Module):
                    pair: object
                    inner: object

                    def __init__(self):
                        self.pair = Pair(1.0, 2.0)
                        self.inner = Inner(1.0)
                """
        },
    )
    assert codes(migrate(tmp_path, "--check", ".")) == ["scene.py:19 AF001 Inner.w"]


def test_a_class_from_outside_the_project_may_be_a_pytree(tmp_path):
    write_tree(
        tmp_path,
        {
            "scene.py": """\
                import equinox as eqx
                from astropy.wcs import WCS


                class Scene(eqx.Module):
                    wcs: object

                    def __init__(self, header):
                        self.wcs = WCS(header)
                """
        },
    )
    result = migrate(tmp_path, "--check", ".")
    assert codes(result) == ["scene.py:6 AF005 Scene.wcs"]
    assert "may be a pytree" in result.stdout
    assert "hashed by identity, so" in result.stdout
    assert "declare the field static=True" not in result.stdout


def test_standard_library_classes_are_known_pytrees_or_not(tmp_path):
    write_tree(
        tmp_path,
        {
            "m.py": """\
                import threading
                from collections import OrderedDict

                import equinox as eqx


                class M(eqx.Module):
                    table: object
                    lock: object

                    def __init__(self):
                        self.table = OrderedDict(a=1.0)
                        self.lock = threading.Lock()
                """
        },
    )
    result = migrate(tmp_path, "--check", ".")
    assert codes(result) == ["m.py:9 AF005 M.lock"]
    assert "may be a pytree" not in result.stdout


RENDERER = """\
import equinox as eqx
import jax
import jax.numpy as jnp


def _get_fast_shape(shape, padding):
    return [size + padding + (size + padding) % 2 for size in shape]


def convolve(image, kernel, fft_shape):
    padded = jnp.fft.rfft2(image, s=fft_shape)
    return jnp.fft.irfft2(padded * jnp.fft.rfft2(kernel, s=fft_shape), s=fft_shape)


class Renderer(eqx.Module):
    kernel: jax.Array
    _fft_shape: jnp.array

    def __init__(self, shape):
        self.kernel = jnp.ones((3, 3))
        self._fft_shape = _get_fast_shape(shape, 4)

    def __call__(self, image):
        frequencies = jnp.fft.rfftfreq(self._fft_shape[-1])
        out = convolve(image, self.kernel, fft_shape=self._fft_shape)
        return out[: image.shape[0], : image.shape[1]] + frequencies[0]


@eqx.filter_jit
def render(renderer, image):
    return renderer(image)


print(render(Renderer((8, 8)), jnp.ones((8, 8))).shape)
"""


def test_af002_sees_a_shape_keyword_and_a_subscripted_use(tmp_path):
    # Neither use on its own was seen before: each is enough.
    keyword_only = RENDERER.replace(
        "frequencies = jnp.fft.rfftfreq(self._fft_shape[-1])", "frequencies = [0.0]"
    ).replace("self._fft_shape = _get_fast_shape(shape, 4)", "self._fft_shape = shape")
    subscript_only = RENDERER.replace(
        "fft_shape=self._fft_shape)", "fft_shape=(12, 12))"
    ).replace("self._fft_shape = _get_fast_shape(shape, 4)", "self._fft_shape = shape")
    for name, source in (("kw.py", keyword_only), ("sub.py", subscript_only)):
        write_tree(tmp_path, {name: source})
    result = migrate(tmp_path, "--check", ".")
    assert codes(result) == [
        "kw.py:17 AF002 Renderer._fft_shape",
        "sub.py:17 AF002 Renderer._fft_shape",
    ]
    assert "used as a shape or size at kw.py:25" in result.stdout
    assert "used as a shape or size at sub.py:24" in result.stdout


def test_af002_sees_a_field_assigned_a_helpers_list_of_ints(tmp_path):
    unused = RENDERER.replace(
        "frequencies = jnp.fft.rfftfreq(self._fft_shape[-1])", "frequencies = [0.0]"
    ).replace("fft_shape=self._fft_shape)", "fft_shape=(12, 12))")
    write_tree(tmp_path, {"renderer.py": unused})
    result = migrate(tmp_path, "--check", ".")
    assert codes(result) == ["renderer.py:17 AF002 Renderer._fft_shape"]
    assert "`_get_fast_shape(...)` returns (renderer.py:21)" in result.stdout


def test_fix_for_a_shape_from_a_helper_runs_under_jit_and_plain_migration_fails(
    tmp_path,
):
    plain, fixed = tmp_path / "plain", tmp_path / "fixed"
    for root in (plain, fixed):
        write_tree(root, {"renderer.py": RENDERER})
    before = run_code("import renderer", cwd=plain)
    assert before.returncode == 0, before.stderr
    assert before.stdout == "(8, 8)\n"

    assert migrate(plain, ".").returncode == 0
    assert migrate(fixed, "--fix", ".").returncode == 0
    assert (
        "_fft_shape: jnp.array = af.field(convert=False)"
        in (fixed / "renderer.py").read_text()
    )

    broken = run_code("import renderer", cwd=plain)
    assert broken.returncode != 0
    assert "Error" in broken.stderr
    works = run_code("import renderer", cwd=fixed)
    assert works.returncode == 0, works.stderr
    assert works.stdout == "(8, 8)\n"


def test_af002_sees_positional_shape_arguments(tmp_path):
    write_tree(
        tmp_path,
        {
            "m.py": """\
                import equinox as eqx
                import jax
                import jax.numpy as jnp
                from jax import lax


                class M(eqx.Module):
                    size: jax.Array
                    count: jax.Array
                    steps: jax.Array
                    data: jax.Array

                    def window(self, x, start):
                        return lax.dynamic_slice(x, (start,), (self.size,))

                    def grid(self):
                        return jnp.arange(self.count) + jnp.linspace(0, 1, self.steps)

                    def scaled(self, x):
                        return jnp.zeros_like(x) + self.data
                """
        },
    )
    assert codes(migrate(tmp_path, "--check", ".")) == [
        "m.py:8 AF002 M.size",
        "m.py:9 AF002 M.count",
        "m.py:10 AF002 M.steps",
    ]


TRAINABLE = """\
import equinox as eqx
import jax
from jaxtyping import Array, Float, Int


class Layer(eqx.Module):
    weight: Float[Array, ""]
    eps: Float[Array, ""] = 1e-5
    scale: Float[Array, ""] = 2
    shift: jax.Array = eqx.field(default=-0.5)
    steps: Int[Array, ""] = 3
    count: jax.Array = 4
    converted: jax.Array = eqx.field(default=1.0, converter=jax.numpy.asarray)
    momentum: Float[Array, ""]

    def __init__(self, weight):
        self.weight = weight
        self.momentum = 0.9
"""


def test_af007_reports_numeric_constants_that_become_trainable(tmp_path):
    write_tree(tmp_path, {"layer.py": TRAINABLE})
    result = migrate(tmp_path, "--check", ".")
    assert codes(result) == [
        "layer.py:8 AF007 Layer.eps",
        "layer.py:9 AF007 Layer.scale",
        "layer.py:10 AF007 Layer.shift",
        "layer.py:14 AF007 Layer.momentum",
    ]
    lines = [line for line in result.stdout.splitlines() if " AF007 " in line]
    assert "defaults to `1e-5`" in lines[0]
    assert "is set to `0.9` on line 18" in lines[3]
    for recipe in ("static=True", "af.field(convert=False)", "jax.lax.stop_gradient"):
        assert recipe in lines[0]


def test_af007_is_not_reported_once_the_class_is_migrated(tmp_path):
    write_tree(tmp_path, {"layer.py": TRAINABLE})
    assert migrate(tmp_path, ".").returncode == 0
    assert codes(migrate(tmp_path, "--check", ".")) == []


OPTAX_STEPS = """\
import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float

import arrayfield as af


def layer(base, default=1e-5):
    class Layer(base):
        weight: Float[Array, ""]
        eps: Float[Array, ""] = default

    return Layer(weight=jnp.asarray(1.0))


def train(model, steps=50):
    optimizer = optax.adam(0.01)
    params = eqx.filter(model, eqx.is_inexact_array)
    state = optimizer.init(params)

    @eqx.filter_jit
    def step(model, state):
        def loss(model):
            return (model.weight + 10 * model.eps - 3.0) ** 2

        grads = eqx.filter_grad(loss)(model)
        updates, state = optimizer.update(grads, state, model)
        return eqx.apply_updates(model, updates), state

    for _ in range(steps):
        model, state = step(model, state)
    return model


before = train(layer(eqx.Module))
after = train(layer(af.ArrayModule))
# The recipes of docs/changes.md: a Python number again, or configuration.
kept = train(layer(af.ArrayModule, af.field(default=1e-5, convert=False)))
static = train(layer(af.ArrayModule, eqx.field(default=1e-5, static=True)))
print(type(before.eps).__name__, float(before.eps))
print(type(after.eps).__name__, round(float(after.eps), 3))
print(type(kept.eps).__name__, kept.eps, static.eps)
"""


def test_a_constant_that_optax_left_alone_trains_after_the_swap():
    # docs/changes.md, "Gradients and optimizer state": measured, not assumed.
    result = run_code(OPTAX_STEPS)
    assert result.returncode == 0, result.stderr
    before, after, recipes = result.stdout.splitlines()
    assert before == "float 1e-05"
    assert after == "ArrayImpl 0.183"  # 50 adam steps of 0.01 away from 1e-05
    assert recipes == "float 1e-05 1e-05"


# -- advice that never makes a constant trainable (issue 36) ---------------------------

# The newcomer's four-file package: a hierarchy across files, a tuple shape, a
# float constant nothing passes, an array-annotated constant, a counter bumped
# with eqx.tree_at, and a fit whose loss reads all of them.
GALFIT = {
    "galfit/__init__.py": "",
    "galfit/base.py": """\
        import equinox as eqx
        from jaxtyping import Array, Float


        class Component(eqx.Module):
            flux: Float[Array, ""]
            shape: tuple = (4, 4)
            eps: float = 1e-6
            floor: Float[Array, ""] = 1e-6
        """,
    "galfit/model.py": """\
        import jax.numpy as jnp

        from .base import Component


        class Galaxy(Component):
            step: int = 0

            def render(self):
                return self.flux * jnp.ones(self.shape) / (1 + self.eps) + self.floor
        """,
    "galfit/fit.py": """\
        import equinox as eqx
        import jax.numpy as jnp
        import optax

        from .model import Galaxy


        def fit(steps=20):
            model = Galaxy(flux=jnp.asarray(1.0))
            optimizer = optax.adam(0.05)
            state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))

            @eqx.filter_jit
            def step(model, state):
                def loss(model):
                    return jnp.sum((model.render() - 3.0) ** 2)

                grads = eqx.filter_grad(loss)(model)
                updates, state = optimizer.update(grads, state, model)
                model = eqx.apply_updates(model, updates)
                return eqx.tree_at(lambda m: m.step, model, model.step + 1), state

            for _ in range(steps):
                model, state = step(model, state)
            return model
        """,
}
_FIT = (
    "from galfit.fit import fit; m = fit(); "
    "print(type(m.floor).__name__, m.floor, float(m.flux))"
)


def test_a_number_nothing_sets_is_advised_as_a_constant_first(tmp_path):
    write_tree(tmp_path, GALFIT)
    result = migrate(tmp_path, "--check", "galfit")
    (eps,) = [line for line in result.stdout.splitlines() if "Component.eps" in line]
    assert (
        "nothing in the project passes it, assigns it, replaces it or "
        "eqx.tree_at's it: a constant"
    ) in eps
    advice = "Declare it `eps: float = af.field(static=True, default=1e-6)`"
    annotation = 'Annotate it `Float[Array, ""]` only if it is a parameter to fit'
    assert eps.index(advice) < eps.index(annotation)
    (step,) = [line for line in result.stdout.splitlines() if "Galaxy.step" in line]
    assert "replaced with eqx.tree_at at galfit/fit.py" in step
    assert "not static=True: eqx.tree_at cannot replace a static field" in step


@pytest.mark.parametrize(
    "setter",
    [
        "Galaxy(flux=jnp.asarray(1.0), eps=1e-3)",  # a keyword
        "Galaxy(jnp.asarray(1.0), (4, 4), 1e-3)",  # a position that reaches it
        "dataclasses.replace(Galaxy(flux=jnp.asarray(1.0)), eps=1e-3)",
        "eqx.tree_at(lambda m: m.eps, Galaxy(flux=jnp.asarray(1.0)), 1e-3)",
        'setattr(object(), "eps", 1e-3)',
    ],
)
def test_a_number_set_anywhere_is_not_called_a_constant(tmp_path, setter):
    write_tree(
        tmp_path,
        {
            **GALFIT,
            "galfit/make.py": f"""\
                import dataclasses

                import equinox as eqx
                import jax.numpy as jnp

                from .model import Galaxy


                def make():
                    return {setter}
                """,
        },
    )
    result = migrate(tmp_path, "--check", "galfit")
    (eps,) = [line for line in result.stdout.splitlines() if "Component.eps" in line]
    assert "a constant" not in eps
    assert 'Annotate it `eps: Float[Array, ""]`' in eps


def test_positional_arguments_short_of_a_field_leave_it_a_constant(tmp_path):
    write_tree(
        tmp_path,
        {
            **GALFIT,
            "galfit/make.py": """\
                import jax.numpy as jnp

                from .model import Galaxy


                def make():
                    return Galaxy(jnp.asarray(1.0), (4, 4))
                """,
        },
    )
    result = migrate(tmp_path, "--check", "galfit")
    (eps,) = [line for line in result.stdout.splitlines() if "Component.eps" in line]
    assert "a constant" in eps


def test_fix_keeps_what_the_original_held_constant_and_the_fit_unchanged(tmp_path):
    write_tree(tmp_path, GALFIT)
    before = run_code(_FIT, cwd=tmp_path)
    assert before.returncode == 0, before.stderr
    result = migrate(tmp_path, "--fix", "galfit")
    assert result.returncode == 0, result.stderr
    base = (tmp_path / "galfit/base.py").read_text()
    assert 'floor: Float[Array, ""] = af.field(default=1e-6, convert=False)' in base
    # The advice printed for eps names af.field, which the migrated file imports.
    assert "af.field(static=True, default=1e-6)" in result.stdout
    assert "import arrayfield as af" in base
    after = run_code(_FIT, cwd=tmp_path)
    assert after.returncode == 0, after.stderr
    assert after.stdout == before.stdout  # floor still a Python 1e-06, same fit
    assert before.stdout.startswith("float 1e-06 ")
    # Following the printed advice for eps works in the migrated file.
    (tmp_path / "galfit/base.py").write_text(
        base.replace(
            "eps: float = 1e-6", "eps: float = af.field(static=True, default=1e-6)"
        )
    )
    followed = run_code(_FIT, cwd=tmp_path)
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout == before.stdout


def test_fix_leaves_a_constant_marked_noqa_to_train(tmp_path):
    write_tree(
        tmp_path, {"layer.py": TRAINABLE.replace("= 2\n", "= 2  # noqa: AF007\n")}
    )
    assert migrate(tmp_path, "--fix", ".").returncode == 0
    text = (tmp_path / "layer.py").read_text()
    assert 'scale: Float[Array, ""] = 2  # noqa: AF007' in text
    assert 'eps: Float[Array, ""] = af.field(default=1e-5, convert=False)' in text


def test_a_class_statement_and_a_def_are_no_calls_that_pass_a_field(tmp_path):
    # `class Config(eqx.Module):` and `def __init__(self, ...)` look like calls
    # with positional arguments; neither passes the first field.
    write_tree(
        tmp_path,
        {
            "config.py": """\
                import equinox as eqx


                class Config(eqx.Module):
                    tolerance: float = 1e-6


                class Solver:
                    def __init__(self, config, steps):
                        self.config = config
                """,
        },
    )
    result = migrate(tmp_path, "--check", ".")
    assert "Config.tolerance' is annotated `float` and defaults to `1e-6`" in (
        result.stdout
    )


UNDECIDED = """\
import math

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

EPS = float("1e-5")  # a call: a number only running it would show


class Layer(eqx.Module):
    weight: Float[Array, ""]
    eps: Float[Array, ""] = EPS
    pi: Float[Array, ""] = math.pi
    zeros: Float[Array, "3"] = jnp.zeros(3)
    steps: Int[Array, ""] = EPS
    none: Float[Array, ""] | None = None
"""


def test_fix_exits_3_naming_a_default_that_may_be_a_number(tmp_path):
    write_tree(tmp_path, {"layer.py": UNDECIDED})
    assert codes(migrate(tmp_path, "--check", ".")) == [
        "layer.py:12 AF007 Layer.eps",
        "layer.py:13 AF007 Layer.pi",
    ]
    result = migrate(tmp_path, "--fix", ".")
    assert result.returncode == 3, result.stderr
    assert "class Layer(af.ArrayModule):" in (tmp_path / "layer.py").read_text()
    assert (
        "--fix could not tell whether these fields held Python numbers, which now "
        "train (AF007 above): Layer.eps (layer.py:12), Layer.pi (layer.py:13)"
    ) in result.stderr
    assert "declare it `af.field(default=EPS, convert=False)`" in result.stdout


def test_fix_exits_0_once_each_undecided_default_is_decided(tmp_path):
    decided = UNDECIDED.replace(
        "= EPS\n", "= af.field(default=EPS, convert=False)\n", 1
    ).replace("= math.pi\n", "= math.pi  # noqa: AF007\n")
    write_tree(tmp_path, {"layer.py": "import arrayfield as af\n" + decided})
    result = migrate(tmp_path, "--fix", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_module_constant_bound_once_is_read_through(tmp_path):
    source = UNDECIDED.replace('float("1e-5")', "1e-5").replace(
        '    pi: Float[Array, ""] = math.pi\n', ""
    )
    write_tree(tmp_path, {"layer.py": source + "    w: Float[Array, '3'] = W0\n"})
    (tmp_path / "layer.py").write_text(
        (tmp_path / "layer.py")
        .read_text()
        .replace("EPS = 1e-5", "EPS = 1e-5\nW0 = jnp.zeros(3)")
    )
    result = migrate(tmp_path, "--fix", ".")
    assert result.returncode == 0, result.stdout + result.stderr
    text = (tmp_path / "layer.py").read_text()
    assert 'eps: Float[Array, ""] = af.field(default=EPS, convert=False)' in text
    assert "w: Float[Array, '3'] = W0" in text  # an array then: nothing to keep


AXIS_SPEC = {
    "pwc.py": """\
        import equinox as eqx
        from jaxtyping import Array


        class Pwc(eqx.Module):  # values on a time grid
            times: Array
            values: Array
        """,
    "use.py": """\
        import jax
        import jax.numpy as jnp

        from pwc import Pwc


        def total(p):
            return p.values.sum() * p.times[-1]


        batch = Pwc(jnp.arange(3.0), jnp.ones((4, 2)))
        print(jax.vmap(total, in_axes=(Pwc(None, 0),))(batch).shape)
        no_axis = Pwc(None, None)  # no int: nothing to store as an array
        """,
}


def test_a_module_built_as_an_axis_spec_is_af008(tmp_path):
    write_tree(tmp_path, AXIS_SPEC)
    assert run_code("import use", cwd=tmp_path).stdout.strip() == "(4,)"
    result = migrate(tmp_path, "--fix", ".")
    (line,) = [x for x in result.stdout.splitlines() if " AF008 " in x]
    assert line.startswith("use.py:12:")
    assert "Pwc(...) is built as an axis spec (in_axes=)" in line
    assert "eqx.tree_at" in line
    # What it warns of: the migrated spec stores its axis as an array.
    broken = run_code("import use", cwd=tmp_path)
    assert "vmap in_axes must be an int, None, or (nested) container" in broken.stderr


def test_the_shape_argument_table_names_shape_parameters_of_each_function():
    # Every position the table calls a shape, size or axis is one in the
    # function's own signature (the array argument of `broadcast_to`, `tile`
    # and `resize` is not: flagging it would declare an image field static).
    import inspect

    import jax.numpy as jnp
    from jax import lax

    from arrayfield.migrate._facts import _SHAPE_ARGS

    shape_like = {"shape", "new_shape", "reps", "n", "N", "M", "num", "s", "axes"}
    shape_like |= {"axis", "start", "stop", "step", "slice_sizes", "slice_size"}
    for name, positions in _SHAPE_ARGS.items():
        if positions is None:  # every positional argument (`x.reshape(2, 3)`)
            continue
        where = (jnp.fft, jnp, lax) if "fft" in name else (jnp, lax)
        function = next(getattr(m, name) for m in where if hasattr(m, name))
        parameters = [
            p.name
            for p in inspect.signature(function).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        named = [parameters[i] for i in positions]
        assert set(named) <= shape_like, (name, named)


@pytest.mark.parametrize(
    ("imports", "built"),
    [
        ("import jax.numpy as jnp", "jnp.asarray(rate, float)"),
        ("import jax.numpy as np", "np.asarray(rate)"),  # `np` is jax.numpy
        ("import numpy as np", "np.float32(rate)"),
        ("from jax.numpy import array", "array(rate)"),
    ],
)
def test_a_float_field_its_class_converts_itself_is_no_af001(tmp_path, imports, built):
    # The field holds the array `__init__` builds: no new value of it recompiles.
    write_tree(tmp_path, {"model.py": _converted(imports, built)})
    assert codes(migrate(tmp_path, "--check", ".")) == []


def test_a_float_field_its_class_stores_as_a_float_is_af001(tmp_path):
    write_tree(tmp_path, {"model.py": _converted("import math", "float(rate)")})
    assert codes(migrate(tmp_path, "--check", ".")) == ["model.py:6 AF001 A.rate"]


def _converted(imports: str, built: str) -> str:
    return (
        f"import equinox as eqx\n{imports}\n\n\n"
        "class A(eqx.Module):\n"
        "    rate: float\n\n"
        "    def __init__(self, rate):\n"
        f"        self.rate = {built}\n"
    )
