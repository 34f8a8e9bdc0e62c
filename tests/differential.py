"""Differential testing of `af.filter_jit` against `eqx.filter_jit`.

A *scenario* is data: which kind of callable carries a value into the program
(a closure cell, a `functools.partial`, a bound method, a dataclass field with
`compare=False`, a module global, a class attribute, a dict entry, ...), what the
program does with it, and a sequence of actions (call, rebind the value, make a
new callable, make a new wrapper, take a gradient). `run_world(scenario, jit)`
builds everything fresh for one jit (callables, state, wrappers) and returns what
a user could observe after each action: outputs (dtype, weak type, shape, bytes;
other leaves by type, value and which object they are), exceptions (type and
message), what each trace saw (a log appended at trace time, whose length the
program can also read back), warnings, and which donated buffers were consumed.
`check(scenario)` runs both jits and asserts the observations are equal.

Caches are never cleared between scenarios: a program compiled for one scenario
must never run another's call wrongly.

Run by hand for longer than CI does (this file is a script too):

    JAX_PLATFORMS=cpu .venv/bin/python tests/differential.py --examples 2000
    (--numbers: against `af.filter_jit(share_numbers=True)`, within its bound)
"""

from __future__ import annotations

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # before JAX is imported

import argparse
import contextlib
import dataclasses
import functools
import itertools
import re
import sys
import time
import types
import warnings
from collections.abc import Callable
from typing import Any

import equinox as eqx
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from hypothesis import HealthCheck, given, seed, settings

import arrayfield as af

JITS: dict[str, Callable[..., Any]] = {"eqx": eqx.filter_jit, "af": af.filter_jit}

# ---------------------------------------------------------------------------
# Values: each name makes a fresh object per world, so identity is observable.
# Groups hold values that are == to each other but differ in type or bits.

VALUES: dict[str, Callable[[], Any]] = {
    "1": lambda: 1,
    "1.0": lambda: float("1.0"),
    "True": lambda: True,
    "2": lambda: 2,
    "2.0": lambda: float("2.0"),
    "0.0": lambda: float("0.0"),
    "-0.0": lambda: float("-0.0"),
    "False": lambda: False,
    "2.5": lambda: float("2.5"),
    "nan": lambda: float("nan"),
    "None": lambda: None,
    # NumPy scalars and arrays are arrays to filter_jit: traced, never hashed.
    "np.float32(1)": lambda: np.float32(1),
    "np.int32(2)": lambda: np.int32(2),
    # JAX arrays: traced as arguments, embedded as constants when captured.
    "jnp(1.0)": lambda: jnp.asarray(1.0),  # weak f32[]
    "jnp(2.0)": lambda: jnp.asarray(2.0),
    "jnp.f32(1.0)": lambda: jnp.asarray(1.0, jnp.float32),  # strong f32[]
    "jnp[1,2]": lambda: jnp.asarray([1.0, 2.0]),
    "jnp[1,3]": lambda: jnp.asarray([1.0, 3.0]),
    "jnp.i32(1)": lambda: jnp.asarray(1, jnp.int32),
}
# == to each other, hashed alike, different in type or bits.
EQUAL_GROUPS = (("1", "1.0", "True"), ("2", "2.0"), ("0.0", "-0.0", "False"))
PYTHON_VALUES = ("1", "1.0", "True", "2", "2.0", "0.0", "-0.0", "False", "2.5", "nan")
# Arrays grouped by what a traced argument's signature is (shape, dtype, weak).
ARRAY_AVALS = (
    ("jnp(1.0)", "jnp(2.0)"),
    ("jnp.f32(1.0)",),
    ("jnp[1,2]", "jnp[1,3]"),
    ("jnp.i32(1)",),
    ("np.float32(1)",),
    ("np.int32(2)",),
)

# Inputs passed as `x`, the first argument.
INPUTS: dict[str, Callable[[], Any]] = {
    "f32[2]": lambda: jnp.asarray([1.5, -2.0], jnp.float32),
    "f32[2]'": lambda: jnp.asarray([-0.5, 3.0], jnp.float32),  # same signature
    "f32[3]": lambda: jnp.asarray([1.5, -2.0, 0.25], jnp.float32),
    "i32[2]": lambda: jnp.asarray([3, -1], jnp.int32),
    "f16[2]": lambda: jnp.asarray([1.5, -2.0], jnp.float16),
    "bool[2]": lambda: jnp.asarray([True, False]),
    "f32[]": lambda: jnp.asarray(0.75, jnp.float32),
    "weak f32[]": lambda: jnp.asarray(0.75),  # jnp.asarray(python float): weak
    "np f32[2]": lambda: np.asarray([1.5, -2.0], np.float32),
    "np.float32": lambda: np.float32(0.75),
    "python 0.75": lambda: float("0.75"),  # not an array: static
}
SAME_SIGNATURE_INPUTS = (("f32[2]", "f32[2]'", "np f32[2]"),)


def fresh(name: str) -> Any:
    return VALUES[name]() if name in VALUES else INPUTS[name]()


def is_python_value(obj: Any) -> bool:
    return isinstance(obj, (bool, int, float, type(None)))


# ---------------------------------------------------------------------------
# The scenario


OPS = ("mul", "add", "full", "exp", "where", "sum", "cast", "custom_jvp")
OUTS = ("array", "dict", "nested")
ERRORS = ("none", "trace_if_bool", "runtime_if_large", "tracer_bool")
KINDS = (
    "closure_cell",  # late-binding: callables made in a loop share one cell
    "default_arg",  # lambda x, c=c: bound when made
    "literal",  # the value written in the code
    "partial",  # functools.partial(body, c)
    "eqx_partial",  # eqx.Partial: a pytree, numbers static, arrays traced
    "method_plain",  # bound method of an object without __eq__
    "method_eq",  # bound method of an object with __eq__ by value
    "callable_plain",  # callable object without __eq__ (identity)
    "callable_eq",  # callable object with __eq__ by value (1 == 1.0 == True)
    "dataclass_compare_false",  # frozen dataclass, the value a compare=False field
    "module_field",  # eqx.Module with the value as a field
    "module_global",  # a global of the callable's module, rebound
    "class_attr",  # a class attribute, rebound; the callable a classmethod
    "dict_entry",  # CFG["gain"], mutated
    "list_entry",  # L[0], mutated
    "custom_jvp",  # a jax.custom_jvp made per callable, its rule using the value
)
# Kinds whose objects compare equal while holding different values: a rebind
# makes an equal key that traces differently (see `avoid_equal_keys`).
EQUAL_BLIND_KINDS = ("callable_eq", "dataclass_compare_false")
COMBINES = ("ignore", "pass_s", "scale_s", "pass_f")
DONATES = ("none", "all", "all-except-first", "warn", "warn-except-first")


@dataclasses.dataclass(frozen=True)
class Call:
    x: str
    s: str
    keyword: bool = False
    grad: bool = False


@dataclasses.dataclass(frozen=True)
class Rebind:
    value: str


@dataclasses.dataclass(frozen=True)
class Make:
    """A new callable from the current value (the jitted role: a new wrapper)."""


@dataclasses.dataclass(frozen=True)
class Rewrap:
    """A new wrapper of the same function."""


Action = Call | Rebind | Make | Rewrap


@dataclasses.dataclass(frozen=True)
class Scenario:
    kind: str
    role: str  # "argument": jit(step)(x, f, s); "jitted": jit(f)(x)
    op: str
    out: str
    error: str
    reads_log: bool  # the program reads len(log) at trace time
    combine: str  # what `step` does with s (argument role)
    donate: str
    initial: str
    actions: tuple[Action, ...]
    # Whether equal-but-different keys may be traced again (see `scenarios`).
    equal_keys_meet_new_signatures: bool = True


@st.composite
def scenarios(draw: Any, allow_known: bool = False) -> Scenario:
    """Scenarios. Unless `allow_known`, none where af.filter_jit's known
    disagreement can show: a second trace under a key first made by other,
    equal objects (a new signature, or a retry after a trace that raised),
    which af.filter_jit traces with the first objects and jax.jit with the
    current ones (test_jit_differential.py has each case as a strict xfail)."""
    kind = draw(st.sampled_from(KINDS))
    role = draw(st.sampled_from(("argument", "jitted")))
    op = draw(st.sampled_from(OPS))
    known = allow_known and draw(st.booleans())
    # Without the known case, either the signatures vary (then each group of
    # equal values is one representative) or equal values vary (then each kind
    # of argument keeps one signature).
    vary_signatures = draw(st.booleans())
    value_names = list(VALUES)
    input_names = list(INPUTS)
    # A jitted pytree callable's numbers are its wrapper's static part: af keys
    # wrappers by it and traces with the first equal wrapper's, even at the
    # second wrapper's first call (test_equal_static_functions_at_a_first_call).
    static_part = role == "jitted" and kind in ("eqx_partial", "module_field")
    if not known:
        if vary_signatures or static_part:
            value_names = [
                name for name in value_names if not any(name in g for g in EQUAL_GROUPS)
            ] + [draw(st.sampled_from(g)) for g in EQUAL_GROUPS]
        else:
            aval = draw(st.sampled_from(ARRAY_AVALS))
            value_names = [*PYTHON_VALUES, "None", *aval]
            input_names = list(
                draw(st.sampled_from([*SAME_SIGNATURE_INPUTS, *[(n,) for n in INPUTS]]))
            )
    errors = ERRORS
    if not known and not vary_signatures:
        # A trace that raised leaves af.filter_jit's key holding its values
        # (the known disagreement too): only traces that succeed here.
        errors = ("none", "runtime_if_large")
    if op == "exp":
        # XLA on the CPU returns uninitialised memory for exp(nan), under
        # jax.jit too: no bits to compare.
        value_names = [name for name in value_names if name != "nan"]
    values = st.sampled_from(sorted(value_names))
    inputs = st.sampled_from(sorted(input_names))
    # Outside the known case an equality-blind object is made once: a second,
    # equal one would be traced as the first by af.filter_jit.
    blind = kind in EQUAL_BLIND_KINDS and not known
    rebinds = st.nothing() if blind else values.map(Rebind)
    makes = st.nothing() if blind else st.just(Make())
    donate = draw(st.sampled_from(DONATES))
    # A gradient through a donating call may consume the argument under af
    # (test_a_gradient_through_a_donating_call_keeps_the_argument).
    grads = (False, False, False, True) if known or donate == "none" else (False,)
    call = st.builds(
        Call, x=inputs, s=values, keyword=st.booleans(), grad=st.sampled_from(grads)
    )
    action = st.one_of(call, call, rebinds, makes, st.just(Rewrap()))
    actions = draw(st.lists(action, min_size=1, max_size=7))
    actions.append(draw(call))  # every scenario ends with a call
    return Scenario(
        kind=kind,
        role=role,
        op=op,
        out=draw(st.sampled_from(OUTS)),
        error=draw(st.sampled_from(errors)),
        reads_log=draw(st.booleans()),
        combine=draw(st.sampled_from(COMBINES)),
        donate=donate,
        initial=draw(values),
        actions=tuple(actions),
        equal_keys_meet_new_signatures=known,
    )


# ---------------------------------------------------------------------------
# Callables of every kind. Classes live at module level, so that output
# structures holding them compare equal between the two worlds.


def _body_last(c, body, x):  # functools.partial(_body_last, c, body)
    return body(x, c)


class MethodPlain:
    def __init__(self, c, body):
        self.c, self.body = c, body

    def apply(self, x):
        return self.body(x, self.c)


class MethodEq(MethodPlain):
    def __init__(self, c, body, tag):
        super().__init__(c, body)
        self.tag = tag

    def __eq__(self, other):
        return type(other) is MethodEq and (self.c, self.tag) == (other.c, other.tag)

    def __hash__(self):
        return hash((self.c, self.tag))


class CallablePlain(MethodPlain):
    def __call__(self, x):
        return self.body(x, self.c)


class CallableEq(MethodEq):
    def __call__(self, x):
        return self.body(x, self.c)


@dataclasses.dataclass(frozen=True)
class DataclassCompareFalse:
    tag: str
    c: Any = dataclasses.field(compare=False)
    body: Any = dataclasses.field(compare=False)

    def __call__(self, x):
        return self.body(x, self.c)


class ModuleField(eqx.Module):
    c: Any
    body: Callable = eqx.field(static=True)

    def __call__(self, x):
        return self.body(x, self.c)


_GLOBAL_CODE = compile("lambda x: body(x, GAIN)", "<generated module>", "eval")
_GLOBAL_CODE = next(c for c in _GLOBAL_CODE.co_consts if isinstance(c, types.CodeType))


class World:
    """Everything one jit's run of a scenario builds, made fresh."""

    def __init__(self, scenario: Scenario, jit: Callable[..., Any], tag: str):
        self.scenario = scenario
        self.jit = jit
        self.tag = tag  # equal objects of one scenario, never of two
        self.log: list[tuple] = []
        self.labels: dict[int, str] = {}  # id -> which object, for outputs
        self.keep: list[Any] = []  # objects labelled stay alive (ids unique)
        self.made = 0
        self.python_values: dict[str, Any] = {}
        self.body = self._make_body()
        self.current_value: Any = None
        # Shared state the rebinding kinds read at trace time.
        self.cell_box: list[Any] = [None]
        self.namespace: dict[str, Any] = {"body": self.body, "GAIN": None}
        self.holder_class = type(
            "Holder",
            (),
            {
                "gain": None,
                "apply": classmethod(lambda cls, x: self.body(x, cls.gain)),
            },
        )
        self.cfg: dict[str, Any] = {"gain": None}
        self.cfg_list: list[Any] = [None]
        self.current: Any = None
        self.step = self.make_step()

    def value(self, name: str, label: str) -> Any:
        """A value of this world; outside the known case one object per Python
        value, so that equal values are the same object (af.filter_jit traces a
        key's first objects)."""
        if not self.scenario.equal_keys_meet_new_signatures:
            found = self.python_values.get(name)
            if found is not None:
                return found
        obj = self.label(fresh(name), label)
        if is_python_value(obj):
            self.python_values[name] = obj
        return obj

    def label(self, obj: Any, name: str) -> Any:
        self.labels[id(obj)] = name
        self.keep.append(obj)
        return obj

    # The program -----------------------------------------------------------

    def _make_body(self) -> Callable[[Any, Any], Any]:
        s = self.scenario
        log = self.log

        def body(x, c):
            log.append(("trace", describe(x), describe(c)))
            y = apply_op(s.op, x, c)
            if s.reads_log:
                y = y + len(log)
            if s.error == "trace_if_bool" and type(c) is bool:
                raise ValueError(f"refused a bool: {c!r} at trace {len(log)}")
            if s.error == "runtime_if_large":
                y = eqx.error_if(y, jnp.any(jnp.abs(y) > 2.5), "y is above 2.5")
            if s.error == "tracer_bool" and jnp.sum(y) > 0:
                y = -y
            if s.out == "dict":
                return {"y": y, "one": 1, "c": c}
            if s.out == "nested":
                return [y, (len(log), None)]
            return y

        return body

    # Callables -------------------------------------------------------------

    def rebind(self, name: str) -> None:
        value = self.value(name, f"value {name}#{len(self.keep)}")
        self.current_value = value
        kind = self.scenario.kind
        self.cell_box[0] = value
        self.namespace["GAIN"] = value
        self.holder_class.gain = value  # pyright: ignore[reportAttributeAccessIssue]
        self.cfg["gain"] = value
        self.cfg_list[0] = value
        # Objects compared by identity: mutated in place, as users do.
        if kind == "method_plain" and self.current is not None:
            self.current.__self__.c = value
        if kind == "callable_plain" and self.current is not None:
            self.current.c = value

    def make(self) -> Any:
        kind, value = self.scenario.kind, self.current_value
        body, box = self.body, self.cell_box
        if kind == "closure_cell":
            f = lambda x: body(x, box[0])  # noqa: E731
        elif kind == "default_arg":
            f = lambda x, c=value: body(x, c)  # noqa: E731
        elif kind == "literal":
            source = literal_source(self.scenario.initial)
            f = eval(source, {"body": body, "np": np, "jnp": jnp})
        elif kind == "partial":
            f = functools.partial(_body_last, value, body)
        elif kind == "eqx_partial":
            f = eqx.Partial(_body_last, value, body)
        elif kind == "method_plain":
            f = MethodPlain(value, body).apply
        elif kind == "method_eq":
            f = MethodEq(value, body, self.tag).apply
        elif kind == "callable_plain":
            f = CallablePlain(value, body)
        elif kind == "callable_eq":
            f = CallableEq(value, body, self.tag)
        elif kind == "dataclass_compare_false":
            f = DataclassCompareFalse(self.tag, value, body)
        elif kind == "module_field":
            f = ModuleField(value, body)
        elif kind == "module_global":
            # A new function of the same module each time: its globals are
            # this world's namespace, rebound by `rebind`.
            f = types.FunctionType(_GLOBAL_CODE, self.namespace, "apply")
        elif kind == "class_attr":
            f = self.holder_class.apply
        elif kind == "dict_entry":
            cfg = self.cfg
            f = lambda x: body(x, cfg["gain"])  # noqa: E731
        elif kind == "list_entry":
            cfg_list = self.cfg_list
            f = lambda x: body(x, cfg_list[0])  # noqa: E731
        elif kind == "custom_jvp":
            f = _custom_jvp(body, value)
        else:
            raise AssertionError(kind)
        self.made += 1
        self.current = self.label(f, f"callable#{self.made}")
        return f

    def wrap(self) -> Any:
        s = self.scenario
        if s.role == "jitted":
            return self.jit(self.current, donate=s.donate)
        return self.jit(self.step, donate=s.donate)

    def make_step(self) -> Callable[..., Any]:
        combine = self.scenario.combine

        def step(x, f, s):
            out = f(x)
            if combine == "pass_s":
                return out, s
            if combine == "scale_s":
                return jtu.tree_map(lambda y: y * s if eqx.is_array(y) else y, out)
            if combine == "pass_f":
                return out, f
            return out

        return step


def _custom_jvp(body, value):
    @jax.custom_jvp
    def f(x):
        return body(x, value)

    def rule(primals, tangents):
        return f(*primals), jtu.tree_map(lambda t: t * 2.0, f(tangents[0]))

    f.defjvp(rule)
    return f


def literal_source(name: str) -> str:
    text = {"nan": "float('nan')"}.get(name, name)
    if name.startswith("jnp"):
        text = "jnp.asarray(1.0)"  # arrays written in the code: one constant
    return f"lambda x: body(x, {text})"


def apply_op(op: str, x: Any, c: Any) -> Any:
    if op == "mul":
        return x * c
    if op == "add":
        return x + c
    if op == "full":
        return jnp.full(jnp.shape(x), c)
    if op == "exp":
        return jnp.exp(x * c)
    if op == "where":
        return jnp.where(x > 0, x, c)
    if op == "sum":
        return jnp.sum(x * c)
    if op == "cast":
        return jnp.asarray(x, dtype=jnp.result_type(c))
    if op == "custom_jvp":
        return _relu(x) * c
    raise AssertionError(op)


@jax.custom_jvp
def _relu(x):
    return jnp.maximum(x, 0)


_relu.defjvp(lambda p, t: (_relu(p[0]), jnp.where(p[0] > 0, t[0], 0)))


# ---------------------------------------------------------------------------
# Observations

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
# JAX's tracer errors name the function it traced by its file and line, and the
# argument a value came from by its path in that function's arguments: both are
# the jit's internals (equinox's `fun_wrapped(dynamic_donate, ...)`, af's
# `run(*call_args)`), the one known difference in messages (see
# test_jit_differential.py, test_tracer_errors_name_internal_arguments).
INTERNAL_LOCATIONS = (
    (re.compile(r"(tracing the function \S+) at \S+:\d+ for"), r"\1 at <jit> for"),
    (
        re.compile(r"(depends on the values? of the arguments?) [^\n]*?\.(\n|$)"),
        r"\1 <path>.\2",
    ),
    # Where the tracer came from: JAX explains it from the innermost jit, whose
    # arguments are the wrapper's internals (older JAX words it by argument).
    (re.compile(r"(for jit\.)\s.*?(\nSee https)", re.S), r"\1 <provenance>\2"),
    # The position of a deleted (donated) buffer among the executable's inputs.
    (re.compile(r"(passed to Execute\(\) as argument) \d+"), r"\1 <n>"),
)


# Frames of arrayfield itself in a traceback a message quotes (JAX's message
# for an unhashable static argument quotes the stack that hashed it).
_OWN_FRAMES = re.compile(r'  File "[^"]*/arrayfield/[^"]*", line \d+, in \S+\n')
# eqx.error_if's "stack outside of JIT" (see test_jit_differential.py,
# test_error_if_stack_of_a_first_call_with_a_numpy_array).
_ERROR_IF_STACK = re.compile(
    r"(Below is the stack inside of JIT:\n).*?(equinox\.)", re.S
)


def normalise(text: str, internals: bool = True) -> str:
    text = _ADDRESS.sub("0x?", text)
    if internals:
        for pattern, replacement in INTERNAL_LOCATIONS:
            text = pattern.sub(replacement, text)
        text = _OWN_FRAMES.sub("", text)
        text = _ERROR_IF_STACK.sub(r"\1<stack>\n\2", text)
    return text


def describe(x: Any) -> tuple:
    """What a trace saw of a value (run at trace time)."""
    if isinstance(x, jax.core.Tracer):
        aval = x.aval
        return (type(x).__name__, aval.shape, str(aval.dtype), aval.weak_type)
    if isinstance(x, (jax.Array, np.ndarray, np.generic)):
        return (type(x).__name__, np.shape(x), str(x.dtype), np.asarray(x).tobytes())
    return (type(x).__name__, leaf_value(x))


def leaf_value(x: Any) -> Any:
    if type(x) is float:
        return x.hex()
    if isinstance(x, (int, str, type(None), complex)):
        return repr(x)
    return normalise(repr(x))


def observe_output(world: World, out: Any) -> tuple:
    leaves, treedef = jtu.tree_flatten(out)
    seen = []
    for leaf in leaves:
        if isinstance(leaf, jax.Array):
            seen.append(
                (
                    "array",
                    str(leaf.dtype),
                    leaf.shape,
                    leaf.weak_type,
                    np.asarray(leaf).tobytes(),
                )
            )
        else:
            seen.append(
                (
                    "object",
                    type(leaf).__name__,
                    world.labels.get(id(leaf), "unlabelled"),
                    leaf_value(leaf),
                )
            )
    return ("ok", normalise(str(treedef)), tuple(seen))


# A donated buffer used again: JAX raises RuntimeError on one dispatch path and
# ValueError on another (test_a_deleted_array_passed_to_a_new_wrapper_...).
_DELETED = ("Array has been deleted", "Buffer has been deleted or donated")


def observe_error(error: BaseException) -> tuple:
    if any(text in str(error) for text in _DELETED):
        return ("raised", "a deleted buffer")
    return ("raised", type(error).__name__, normalise(str(error)))


def deleted(tree: Any) -> tuple:
    return tuple(
        leaf.is_deleted()
        for leaf in jtu.tree_leaves(tree)
        if isinstance(leaf, jax.Array)
    )


UNUSABLE_DONATION = "Some donated buffers were not usable"


def run_world(scenario: Scenario, jit: Callable[..., Any], tag: str) -> list:
    """What one jit shows, action by action."""
    world = World(scenario, jit, tag)
    world.rebind(scenario.initial)
    world.make()
    wrapper = world.wrap()
    observed: list = []
    for index, action in enumerate(scenario.actions):
        if isinstance(action, Rebind):
            world.rebind(action.value)
            continue
        if isinstance(action, Make):
            world.make()
            if scenario.role == "jitted":
                wrapper = world.wrap()
            continue
        if isinstance(action, Rewrap):
            wrapper = world.wrap()
            continue
        x = world.label(fresh(action.x), f"x#{index}")
        s = world.value(action.s, f"s#{index}")
        log_before = len(world.log)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                outcome = observe_output(world, call(world, wrapper, action, x, s))
            except Exception as error:  # every exception is an observation
                outcome = observe_error(error)
        observed.append(
            (
                index,
                outcome,
                tuple(world.log[log_before:]),
                tuple(
                    (w.category.__name__, normalise(str(w.message)))
                    for w in caught
                    # Emitted when a program is lowered: a shared compile is
                    # not (test_unusable_donation_warning_of_a_shared_compile).
                    if not str(w.message).startswith(UNUSABLE_DONATION)
                ),
                deleted((x, s, world.current)),
            )
        )
    return observed


def call(world: World, wrapper: Any, action: Call, x: Any, s: Any) -> Any:
    if world.scenario.role == "jitted":
        run = lambda x: wrapper(x=x) if action.keyword else wrapper(x)  # noqa: E731
    else:
        f = world.current
        run = (  # noqa: E731
            lambda x: wrapper(x, f, s=s) if action.keyword else wrapper(x, f, s)
        )
    if not action.grad:
        return run(x)
    return jax.grad(lambda x: sum(jnp.sum(y) for y in float_leaves(run(x))))(x)


def float_leaves(tree: Any) -> list:
    return [
        y
        for y in jtu.tree_leaves(tree)
        if eqx.is_array(y) and jnp.issubdtype(y.dtype, jnp.floating)
    ]


_scenario_ids = itertools.count()


def check(scenario: Scenario) -> None:
    """Both jits, same scenario: every observation equal."""
    tag = f"scenario-{next(_scenario_ids)}"
    if scenario.equal_keys_meet_new_signatures:
        tag = "shared"  # equal objects across scenarios too
    seen = {name: run_world(scenario, jit, tag) for name, jit in JITS.items()}
    if seen["eqx"] != seen["af"]:
        raise AssertionError(explain(scenario, seen["eqx"], seen["af"]))


# `af.filter_jit(share_numbers=True)`: the same observations, except that a
# floating array's values may differ by float32 rounding (XLA folds constants
# it is given, not inputs): within `NUMBERS_RTOL` of the array's largest value.
NUMBERS_JITS: dict[str, Callable[..., Any]] = {
    "eqx": eqx.filter_jit,
    "af": functools.partial(af.filter_jit, share_numbers=True),
}
NUMBERS_RTOL = 1e-5


def _alike(a: Any, b: Any) -> bool:
    """Two observations equal, but for floating values within `NUMBERS_RTOL`."""
    if (
        isinstance(a, tuple)
        and isinstance(b, tuple)
        and len(a) == len(b) == 5
        and a[0] == b[0] == "array"
    ):
        if a[1:4] != b[1:4]:
            return False
        dtype = np.dtype(a[1])
        if not np.issubdtype(dtype, np.inexact):
            return a[4] == b[4]
        x = np.frombuffer(a[4], dtype).astype(np.float64)
        y = np.frombuffer(b[4], dtype).astype(np.float64)
        finite = np.isfinite(x)
        if not np.array_equal(finite, np.isfinite(y)) or not np.array_equal(
            x[~finite], y[~finite], equal_nan=True
        ):
            return False
        scale = float(np.max(np.abs(x[finite]), initial=0.0)) or 1.0
        return bool(np.all(np.abs(x[finite] - y[finite]) <= NUMBERS_RTOL * scale))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(map(_alike, a, b))
    return a == b


def check_numbers(scenario: Scenario) -> None:
    """eqx.filter_jit and af.filter_jit sharing numbers: every observation
    equal, floating values within `NUMBERS_RTOL`."""
    tag = f"scenario-{next(_scenario_ids)}"
    if scenario.equal_keys_meet_new_signatures:
        tag = "shared"
    seen = {name: run_world(scenario, jit, tag) for name, jit in NUMBERS_JITS.items()}
    if not _alike(seen["eqx"], seen["af"]):
        raise AssertionError(explain(scenario, seen["eqx"], seen["af"]))


def explain(scenario: Scenario, eqx_seen: list, af_seen: list) -> str:
    lines = [f"af.filter_jit differs from eqx.filter_jit in {scenario}"]
    for a, b in itertools.zip_longest(eqx_seen, af_seen):
        if a != b:
            lines.append(f"  eqx: {a}")
            lines.append(f"  af:  {b}")
            break
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# The long run, by hand


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--allow-known",
        action="store_true",
        help="also generate the known disagreement (equal keys, new signature)",
    )
    parser.add_argument(
        "--numbers",
        action="store_true",
        help="against af.filter_jit(share_numbers=True), within its bound",
    )
    parser.add_argument(
        "--keep-going",
        action="store_true",
        help="record disagreements and continue instead of shrinking the first",
    )
    options = parser.parse_args(argv)
    ran = [0]
    found: dict[tuple, tuple[int, str]] = {}
    started = time.perf_counter()

    @settings(
        max_examples=options.examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(scenarios(allow_known=options.allow_known))
    def long_run(scenario: Scenario) -> None:
        ran[0] += 1
        if ran[0] % 100 == 0:
            print(
                f"{ran[0]} examples, {time.perf_counter() - started:.0f} s, "
                f"{len(found)} kinds of disagreement",
                flush=True,
            )
        try:
            (check_numbers if options.numbers else check)(scenario)
        except AssertionError as error:
            if not options.keep_going:
                raise
            key = (scenario.kind, scenario.role, scenario.op, scenario.error)
            size = len(scenario.actions)
            if key not in found:
                print(f"new disagreement: {error}", flush=True)
            if key not in found or size < found[key][0]:
                found[key] = (size, str(error))

    if options.seed is not None:
        long_run = seed(options.seed)(long_run)
    with contextlib.suppress(KeyboardInterrupt):  # stopped by hand, or timeout -s INT
        long_run()
    print(f"{ran[0]} examples in {time.perf_counter() - started:.0f} s")
    for _, text in found.values():
        print(text)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
