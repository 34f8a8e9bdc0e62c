"""Patterns from libraries built on equinox (diffrax, lineax, paramax, distreqx).

Each test is the smallest pattern behind a difference their own test suites showed
once their classes were built as `af.ArrayModule`s (`compat/run_suite.py`): a
library whose classes subclass ArrayModule must behave as it did on `eqx.Module`,
checked here without the library itself.
"""

import abc
import textwrap
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from beartype import beartype
from jaxtyping import (
    Array,
    ArrayLike,
    Float,
    PyTree,
    Real,
    Shaped,
    TypeCheckError,
    jaxtyped,
)

import arrayfield as af
from helpers import run_code

# -- equinox.Module rebound to ArrayModule ----------------------------------------
# What ../shared/compat/swap_library.py does, and any program that patches equinox:
# every `eqx.Module` written after that is ArrayModule; equinox's classes stay plain.

_REBOUND = """
import equinox as eqx
import equinox.nn
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float
import arrayfield as af

class Plain(eqx.Module):  # built before the rebinding: equinox's own Module
    x: Float[Array, ""] = af.field()

eqx.Module = af.ArrayModule
"""


def _run_rebound(body: str) -> None:
    result = run_code(_REBOUND + textwrap.dedent(body))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok", result.stdout


def test_generic_base_keeps_its_dataclass_init_once_module_is_rebound():
    # lineax's `class AbstractLinearSolver(eqx.Module, Generic[S])`, built at import
    # with AutoLinearSolver(well_posed=True); paramax's AbstractUnwrappable[T] too.
    _run_rebound(
        """
        from typing import Generic, TypeVar
        T = TypeVar("T")

        class Solver(eqx.Module, Generic[T]):
            well_posed: bool

        class Wrapper(Solver[int]):
            scale: Float[Array, ""] = 1.0

        assert Solver(well_posed=True).well_posed is True
        w = Wrapper(True, 2)
        assert w.well_posed is True and w.scale.dtype == jnp.float32
        print("ok")
        """
    )


def test_normalize_finds_plain_modules_once_module_is_rebound():
    # A plain Module is still a Module to arrayfield (its af.field converts) after
    # `equinox.Module` names ArrayModule.
    _run_rebound(
        """
        stale = eqx.tree_at(lambda m: m.x, Plain(x=1.0), 2.0)
        assert type(stale.x) is float
        fixed = af.normalize([stale])[0]
        assert isinstance(fixed.x, jax.Array) and float(fixed.x) == 2.0
        print("ok")
        """
    )


def test_audit_reads_plain_module_fields_once_module_is_rebound():
    # The diagnostics still see a plain Module's fields (and their annotations).
    _run_rebound(
        """
        stale = eqx.tree_at(lambda m: m.x, Plain(x=1.0), 2.0)
        report = str(af.audit({"p": stale}))
        assert "Plain.x" in report, report  # the field is named, not only its path
        print("ok")
        """
    )


def test_custom_init_behind_array_module_kept_once_module_is_rebound():
    # `class C(af.ArrayModule, eqx.nn.Linear)` keeps Linear's __init__ either way.
    _run_rebound(
        """
        class Layer(af.ArrayModule, eqx.nn.Linear):
            pass

        layer = Layer(2, 3, key=jax.random.key(0))
        assert layer.weight.shape == (3, 2)
        print("ok")
        """
    )


# -- jaxtyping PyTree annotations, checked by jaxtyping's import hook ---------------
# diffrax's suite instruments diffrax with `@jaxtyped(typechecker=beartype)`.


def test_pytree_field_with_question_mark_dims_builds():
    # diffrax: BM = PyTree[Shaped[ArrayLike, "?*bm"], "BM"]; `?` dims are only
    # valid inside a structured PyTree, so the widened annotation must keep it there.
    @jaxtyped(typechecker=beartype)
    class Path(af.ArrayModule):
        bm: PyTree[Shaped[ArrayLike, "?*bm"], "BM"]

    path = Path(bm=(1.0, np.ones(2), 2))
    # ArrayLike admits Python and NumPy values as they are: stored unchanged.
    assert path.bm[0] == 1.0 and type(path.bm[0]) is float
    assert type(path.bm[1]) is np.ndarray and path.bm[2] == 2

    @jaxtyped(typechecker=beartype)
    class Converted(af.ArrayModule):
        bm: PyTree[Shaped[Array, "?*bm"], "BM"]

    converted = Converted(bm=(1.0, np.ones(2)))
    assert all(isinstance(leaf, jax.Array) for leaf in converted.bm)


def test_pytree_structure_name_kept_in_init():
    # diffrax's Solution: the " S" structure name must survive the widening.
    @jaxtyped(typechecker=beartype)
    class Solution(af.ArrayModule):
        ts: PyTree[Real[Array, " ?times"], " S"] | None

    assert Solution(ts=jnp.arange(3.0)).ts.shape == (3,)
    assert Solution(ts=None).ts is None


def _pair(base: type) -> type:
    @jaxtyped(typechecker=beartype)
    class Pair(base):
        a: PyTree[Float[Array, "?*s"], "T"]
        b: PyTree[Float[Array, "?*s"], "T"]

    return Pair


@pytest.mark.parametrize("base", [eqx.Module, af.ArrayModule])
def test_pytree_structure_still_checked_across_fields(base):
    # Keeping the structure name keeps its check: both bases reject a mismatch.
    pair = _pair(base)
    assert pair(a=(jnp.ones(2), jnp.ones(3)), b=(jnp.ones(2), jnp.ones(3))).a
    with pytest.raises(TypeCheckError):
        pair(a=(jnp.ones(2), jnp.ones(3)), b=jnp.ones(2))


def test_converted_pytree_binds_the_structure_an_unconverted_field_checks():
    # diffrax's underdamped Langevin state: a converted field and an Any sibling
    # share a structure name; widening must not turn a tuple into one leaf.
    @jaxtyped(typechecker=beartype)
    class State(af.ArrayModule):
        x: PyTree[Float[Array, "?*s"], "X"]
        c: PyTree[Any, "X"]

    state = State(x=(jnp.ones(2), jnp.ones(3)), c=(1, 2))
    assert state.c == (1, 2)
    scalars = State(x=(1.0, 2.0), c=(1, 2))  # numbers still welcome as leaves
    assert scalars.x[0].dtype == jnp.float32


# -- a library's own metaclass -----------------------------------------------------


def test_array_module_has_equinox_metaclass():
    # No metaclass of its own, so any metaclass derived from equinox's fits.
    assert type(af.ArrayModule) is type(eqx.Module)


def test_metaclass_derived_from_equinox_combines_with_array_module():
    # distreqx (through ihoop): class _StrictEqxMeta(_StrictMeta, _ModuleMeta).
    made = []

    class StrictMeta(abc.ABCMeta):
        def __new__(mcs, name, bases, namespace, **kwargs):
            cls = super().__new__(mcs, name, bases, namespace, **kwargs)
            made.append(name)  # the library's own step still runs
            return cls

    class StrictEqxMeta(StrictMeta, type(eqx.Module)):
        pass

    class Strict(af.ArrayModule, metaclass=StrictEqxMeta, check=True):
        x: Float[Array, ""] = 0.0

    @jaxtyped(typechecker=beartype)
    class Child(Strict):
        y: Float[Array, ""] = 1

    assert type(Child) is StrictEqxMeta and made == ["Strict", "Child"]
    child = Child(x=2)  # a scalar passes the widened, type-checked __init__
    assert child.x.dtype == jnp.float32 and child.y.dtype == jnp.float32
    with pytest.raises(af.ValidationError, match=r"Strict\.x"):
        Strict(x={"a": 1.0})  # check=True, as on any ArrayModule


# -- check=True rejects values that are not arrays ---------------------------------


class _Unrelated(eqx.Module):
    a: float = 1.0


class _Holder(NamedTuple):
    name: str


class _Checked(af.ArrayModule, check=True):
    x: Float[Array, ""]


@pytest.mark.parametrize(
    "value",
    [{"a": 1.0}, {"x": "not a number"}, _Unrelated(), _Holder("nope")],
    ids=["dict-of-float", "dict-of-str", "unrelated-module", "namedtuple-of-str"],
)
def test_check_rejects_non_arrays_in_an_array_field(value):
    assert not isinstance(value, Float[Array, ""])
    with pytest.raises(af.ValidationError, match=r"_Checked\.x: expected"):
        _Checked(x=value)


def test_check_rejects_non_arrays_in_pytree_leaves():
    class Leaves(af.ArrayModule, check=True):
        xs: PyTree[Float[Array, ""]]

    assert Leaves(xs={"a": 1.0}).xs["a"].dtype == jnp.float32
    with pytest.raises(af.ValidationError, match=r"Leaves\.xs\['a'\]"):
        Leaves(xs={"a": _Unrelated()})


def test_check_keeps_values_that_stand_in_for_arrays():
    # Tracers, equinox's loop buffers (values with .shape and .dtype) and
    # ShapeDtypeStruct stand in for arrays on purpose; union members are admitted.
    class Duck(eqx.Module):  # quax-style: an array value that is a Module
        value: Array

        @property
        def shape(self):
            return self.value.shape

        @property
        def dtype(self):
            return self.value.dtype

    class Admits(af.ArrayModule, check=True):
        x: Float[Array, ""]
        y: int | Float[Array, ""] = 0
        z: _Unrelated | Float[Array, ""] = 0.0

    assert jax.jit(lambda v: Admits(x=v).x)(1.0) == 1.0
    assert isinstance(Admits(x=Duck(jnp.zeros(()))).x, Duck)
    spec = jax.ShapeDtypeStruct((), jnp.float32)
    assert Admits(x=spec).x is spec
    assert Admits(x=1.0, y=3, z=_Unrelated()).y == 3
    with pytest.raises(af.ValidationError, match=r"Admits\.y: expected"):
        Admits(x=1.0, y=_Unrelated())
    assert np.asarray(Admits(x=1.0).x) == 1.0
