"""Trying a piece of advice before giving it: would the function still trace
with these Python numbers passed as arrays?

The arguments cannot tell a number used in arithmetic (an array serves it and
saves the trace) from one used as a slice start, a shape or in Python control
flow (`max(start, 0)`, `if n > 0`), where an array raises. Nor can the jaxpr:
the Python that read the number ran before anything was recorded. So before
`explain_retraces` advises making a number an array, it traces the function
once more with those numbers as strongly typed arrays, abstractly
(`jax.eval_shape`: nothing compiles or runs on a device), and gives the
advice only where that trace succeeds (`af.audit(tree, other, fn=step)` does
the same). The trial runs the function's Python body, as any trace does; it is
made once per function and field, only where a diagnostic was asked for, and
never through the jit wrapper, whose caches it leaves alone.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
import traceback
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .. import _tracing
from .._convert import canonical_dtype
from .._errors import LIBRARY_DIRS
from ._paths import is_array, is_module, path_to_str, relative_path


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why the numbers cannot be arrays: the error the trial trace raised, and
    the line outside JAX, equinox and arrayfield where it did."""

    error: str  # the exception's class name
    at: str  # `file:line`, or "" where no such frame was on the stack

    def __str__(self) -> str:
        where = f" at {self.at}" if self.at else ""
        return f"{self.error}{where}"


class _Trying(threading.local):
    active = False


_trying = _Trying()


def trying() -> bool:
    """Whether this thread is inside a trial trace: watchers stay quiet, as the
    trial is no call of the user's."""
    return _trying.active


def python_function(fn: Any) -> Any:
    """The Python function a jit wrapper calls: its `__wrapped__` chain, with any
    `functools.partial` kept whole (its bound arguments are part of the call)."""
    target = fn
    for _ in range(10):
        wrapped = getattr(target, "__wrapped__", None)
        if wrapped is None:
            break
        target = wrapped
    return target


def as_arrays(
    fn: Any, args: tuple, kwargs: dict, paths: frozenset[str]
) -> Refusal | None:
    """Trace `fn(*args, **kwargs)` abstractly with the Python numbers at `paths`
    (as `_paths.walk` names leaves, under the bound parameter names) passed as
    arrays: None where it traces, else what it raised."""
    target = python_function(fn)
    try:
        bound: inspect.BoundArguments | None = inspect.signature(target).bind(
            *args, **kwargs
        )
    except (TypeError, ValueError):
        bound = None

    def call(arguments: dict[str, Any]) -> Any:
        if bound is None:
            return target(*arguments["args"], **arguments["kwargs"])
        bound.arguments.update(arguments)
        return target(*bound.args, **bound.kwargs)

    arguments = (
        dict(bound.arguments) if bound is not None else {"args": args, "kwargs": kwargs}
    )
    return in_call(call, arguments, paths)


def in_call(
    call: Callable[[dict[str, Any]], Any],
    arguments: dict[str, Any],
    paths: frozenset[str],
) -> Refusal | None:
    """`call(arguments)`, traced abstractly with the Python numbers at `paths`
    in `arguments` (by name, as `_paths.walk` names leaves) passed as arrays."""
    numbers = {p: _array_of(v) for p, v in _numbers_at(arguments, paths).items()}
    if not numbers:
        return None  # nothing to try: say nothing new

    def trial(numbers: dict[str, Any], arguments: dict[str, Any]) -> Any:
        return call(
            {name: _replace(value, name, numbers) for name, value in arguments.items()}
        )

    # Flattened as eqx.filter_jit flattens (leaf by leaf, arrays traced): a
    # prefix-tree partition fails on pytrees whose flattening is their own.
    leaves, treedef = jtu.tree_flatten((numbers, arguments))
    traced = [i for i, x in enumerate(leaves) if is_array(x)]

    def flat_trial(*arrays: Any) -> None:
        full = list(leaves)
        for i, array in zip(traced, arrays, strict=True):
            full[i] = array
        trial(*jtu.tree_unflatten(treedef, full))  # outputs need not be arrays

    return _run(lambda: jax.eval_shape(flat_trial, *(leaves[i] for i in traced)))


def _run(thunk: Callable[[], Any]) -> Refusal | None:
    """Run the trial with this thread's watchers quiet and its trace record
    (which a watched call in progress reads afterwards) as it was."""
    record = _tracing.record
    saved = {name: getattr(record, name) for name in _RECORD_FIELDS}
    _trying.active = True
    try:
        thunk()
    except Exception as error:  # any error: the advice would raise as printed
        return Refusal(type(error).__name__, _user_line(error))
    finally:
        _trying.active = False
        for name, value in saved.items():
            setattr(record, name, value)
    return None


# What `_retrace._run_watched` reads off the trace record after a watched call.
_RECORD_FIELDS = ("program", "number_runs", "number_families", "family")


def _user_line(error: BaseException) -> str:
    """The innermost frame of the error's traceback outside JAX, equinox and
    arrayfield: the line that used the number as a Python value."""
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        if not frame.filename.startswith(LIBRARY_DIRS):
            return f"{relative_path(frame.filename)}:{frame.lineno}"
    return ""


def _array_of(value: Any) -> Any:
    """The array the advice asks for: the number's value, strongly typed in the
    dtype arrayfield would store it in."""
    return jnp.asarray(value, dtype=canonical_dtype(np.asarray(value).dtype))


def _numbers_at(arguments: dict[str, Any], paths: frozenset[str]) -> dict[str, Any]:
    """The leaves at `paths` that are Python numbers, by path."""
    found: dict[str, Any] = {}

    def visit(node: Any, prefix: str) -> None:
        children, _ = jtu.tree_flatten_with_path(
            node, is_leaf=lambda x: x is not node and is_module(x)
        )
        for path, child in children:
            text = path_to_str(prefix, path)
            if child is not node and is_module(child):
                visit(child, text)
            elif text in paths and isinstance(child, bool | int | float | complex):
                found[text] = child

    for name, value in arguments.items():
        visit(value, name)
    return found


def _replace(node: Any, prefix: str, values: dict[str, Any]) -> Any:
    """`node` with the leaves at the paths of `values` replaced (paths as
    `_paths.walk` names them: Modules are walked field by field)."""
    children, treedef = jtu.tree_flatten_with_path(
        node, is_leaf=lambda x: x is not node and is_module(x)
    )
    if not children:
        return node
    new = []
    for path, child in children:
        text = path_to_str(prefix, path)
        if child is not node and is_module(child):
            child = _replace(child, text, values)
        elif text in values:
            child = values[text]
        new.append(child)
    if all(a is b for (_, a), b in zip(children, new, strict=True)):
        return node
    if treedef.num_leaves == 1 and treedef.num_nodes == 1:
        return new[0]  # `node` is itself the leaf
    return jtu.tree_unflatten(treedef, new)
