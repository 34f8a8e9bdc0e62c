"""Pytree key paths written as a user would write them: `scene.sources[1].morph.size`.

Shared by `explain_retraces` and `audit`, so both name a leaf the same way. The root
of a path is the name the value has in the user's code: a function's parameter name
for a call, or whatever name the caller of `audit` gives.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import os
import re
import site
import sys
import sysconfig
import threading
from collections.abc import Callable
from typing import Any

import jax.tree_util as jtu
import numpy as np

from .._eqx_private import is_traced_leaf
from .._facts import PYTHON_NUMBERS, is_module

KeyPath = tuple[Any, ...]


def key_to_str(key: Any) -> str:
    """One key entry as it appears after its parent: `.size`, `[1]`, `["lr"]`."""
    if isinstance(key, jtu.GetAttrKey):
        return f".{key.name}"
    if isinstance(key, jtu.SequenceKey):
        return f"[{key.idx}]"
    if isinstance(key, jtu.DictKey):
        inner = key.key
        if isinstance(inner, str):
            return '["' + inner.replace("\\", "\\\\").replace('"', '\\"') + '"]'
        return f"[{inner!r}]"
    if isinstance(key, jtu.FlattenedIndexKey):
        return f"[{key.key}]"
    return f"[{key}]"  # a key type registered by some other library


def path_to_str(root: str, path: KeyPath) -> str:
    """`root` followed by each key: `path_to_str("opt_state", (0, .count))`."""
    return root + "".join(key_to_str(key) for key in path)


def bind_arguments(
    function: Callable[..., Any], args: tuple, kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The call's arguments by parameter name, as the function itself sees them.

    `*args` and `**kwargs` parameters keep their own names (`args[0]`,
    `kwargs["lr"]`). When the signature is unavailable or the call does not bind,
    positional arguments are named `args[i]` and keywords `kwargs["name"]`.
    """
    try:
        bound = inspect.signature(function).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return {"args": tuple(args), "kwargs": dict(kwargs)}
    return dict(bound.arguments)


@functools.cache
def _install_dirs() -> tuple[str, ...]:
    """Where installed distributions live: site-packages and its kin."""
    dirs = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    with contextlib.suppress(AttributeError):  # a virtualenv's old `site`
        dirs.update(site.getsitepackages())
    with contextlib.suppress(AttributeError):
        dirs.add(site.getusersitepackages())
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs if d)


def installed_package(cls: type) -> str | None:
    """The top-level package of `cls` when its module was installed (is in a
    site-packages directory), else None (the user's project, an editable
    install, a script)."""
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    if not path or not installed_file(path):
        return None
    return cls.__module__.partition(".")[0]


def installed_file(path: str) -> bool:
    """Whether `path` lies in a site-packages directory (an installed package)."""
    path = os.path.realpath(path)
    return any(path.startswith(d) for d in _install_dirs())


@dataclasses.dataclass(frozen=True)
class FieldRef:
    """The dataclass field a leaf is the direct value of (`MyModule.x`)."""

    owner: type
    name: str
    field: dataclasses.Field

    @property
    def annotation(self) -> Any:
        return self.field.type

    @property
    def declared_in(self) -> type:
        """The class whose body declares the field (resolves its string annotation)."""
        for cls in self.owner.__mro__:
            if self.name in cls.__dict__.get("__annotations__", {}):  # noqa: RUF063
                return cls
        return self.owner

    @property
    def where(self) -> str:
        return f"{self.owner.__qualname__}.{self.name}"

    @property
    def _qualified(self) -> str:
        return f"{self.declared_in.__qualname__}.{self.name}"

    @property
    def _line(self) -> str | None:
        return _declaration(self.declared_in, self.name)

    @property
    def declared(self) -> str:
        """`" (declared as SersicMorphology.n, morphology.py:88)"` to end a hint
        with, or `""` when the field's source line cannot be found."""
        line = self._line
        return "" if line is None else f" (declared as {self._qualified}, {line})"

    @property
    def package(self) -> str | None:
        """The installed package the declaring class comes from (`equinox` for
        `eqx.nn.Dropout.p`), or None for the user's own code: a fix inside an
        installed package is not one the user can make."""
        return installed_package(self.declared_in)

    @property
    def named(self) -> str:
        """`declared`, or `" (declared as SersicMorphology.n)"` when the line of
        the declaration cannot be found: a hint always names the field."""
        return self.declared or f" (declared as {self._qualified})"

    @property
    def at(self) -> str:
        """`SersicMorphology.n at morphology.py:88`, or only the class and field
        when the source cannot be found."""
        line = self._line
        return self._qualified if line is None else f"{self._qualified} at {line}"

    @property
    def location(self) -> str:
        """`SersicMorphology.n (morphology.py:88)`, or only the class and field
        when the source cannot be found (a class made with `type(...)`, say)."""
        line = self._line
        return self._qualified if line is None else f"{self._qualified} ({line})"


# One `ast` parse at a time, here and in `_annotations`: CPython 3.11's AST
# constructor checks its recursion depth in state that threads share, so two
# threads parsing at once (two threads' explain_retraces blocks naming one
# field's line, which `inspect.getsourcelines` finds by parsing the module)
# fail with "SystemError: AST constructor recursion depth mismatch".
PARSING = threading.RLock()


def relative_path(filename: str) -> str:
    """`filename` relative to the working directory when it is below it (as
    tracebacks are easiest read), else as given."""
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive on Windows
        return filename
    return filename if relative.startswith("..") else relative


def underlying(fn: Any) -> Any:
    """The Python function behind a (jitted, partial) callable."""
    target = fn
    for _ in range(10):
        if isinstance(target, functools.partial):
            target = target.func
        elif hasattr(target, "__wrapped__"):
            target = target.__wrapped__
        else:
            break
    return target


def function_name(fn: Any) -> str:
    """The name of the Python function behind a (jitted, partial) callable."""
    return getattr(underlying(fn), "__name__", "the function")


def location(fn: Any) -> str:
    """`qualname (file:line)` of the Python function behind a (jitted) callable."""
    target = underlying(fn)
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    code = getattr(target, "__code__", None)
    if code is None:
        return name
    return f"{name} ({relative_path(code.co_filename)}:{code.co_firstlineno})"


@functools.lru_cache(maxsize=1024)
def _declaration(cls: type, name: str) -> str | None:
    """`file.py:line` of `name: ...` in the body of `cls`, if its source is on disk."""
    try:
        with PARSING:
            lines, start = inspect.getsourcelines(cls)
        path = inspect.getsourcefile(cls)
    except (OSError, TypeError):
        return None
    if path is None:
        return None
    pattern = re.compile(rf"\s*{re.escape(name)}\s*:")
    for offset, text in enumerate(lines):
        if pattern.match(text):
            return f"{os.path.basename(path)}:{start + offset}"
    return None


@dataclasses.dataclass(frozen=True)
class Leaf:
    """A pytree leaf, where it is, and the Module field holding it (if directly)."""

    path: str
    value: Any
    field: FieldRef | None
    # The Module field the leaf is in, directly or inside a tuple, list or dict
    # (`Source.origin` for `origin[0]`): what a hint names.
    within: FieldRef | None = None
    # The shape of that container, where it is a list or tuple of Python numbers
    # (what an array annotation for the field would declare).
    within_shape: tuple[int, ...] | None = None


@dataclasses.dataclass(frozen=True)
class StaticField:
    """A `static=True` field of a Module found while walking a tree."""

    path: str
    value: Any
    field: FieldRef


def walk(tree: Any, root: str) -> tuple[list[Leaf], list[StaticField]]:
    """Every leaf of `tree` with its path, plus the static fields of its Modules.

    A leaf that is directly the value of a Module field carries that field, so a
    diagnostic can read its annotation.
    """
    leaves: list[Leaf] = []
    statics: list[StaticField] = []

    def visit(node: Any, prefix: str) -> None:
        fields: dict[str, dataclasses.Field] = {}
        if is_module(node):
            for f in dataclasses.fields(node):
                fields[f.name] = f
                if f.metadata.get("static", False):
                    value = node.__dict__.get(f.name)
                    ref = FieldRef(type(node), f.name, f)
                    statics.append(StaticField(f"{prefix}.{f.name}", value, ref))
        children, _ = jtu.tree_flatten_with_path(
            node, is_leaf=lambda x: x is not node and is_module(x)
        )
        for path, child in children:
            text = path_to_str(prefix, path)
            within = None
            if path and isinstance(path[0], jtu.GetAttrKey):
                f = fields.get(path[0].name)
                if f is not None:
                    within = FieldRef(type(node), f.name, f)
            if child is not node and is_module(child):
                visit(child, text)
            else:
                ref = within if len(path) == 1 else None
                shape = None if ref is not None else _numbers_shape(node, within)
                leaves.append(Leaf(text, child, ref, within, shape))

    visit(tree, root)
    return leaves, statics


def _numbers_shape(node: Any, within: FieldRef | None) -> tuple[int, ...] | None:
    """The shape of the field `within` of `node` where it holds a (nested) list or
    tuple of Python numbers only, else None."""
    if within is None:
        return None
    container = node.__dict__.get(within.name)
    if not isinstance(container, (list, tuple)):
        return None
    leaves = jtu.tree_leaves(container)
    if not leaves or any(type(x) not in PYTHON_NUMBERS for x in leaves):
        return None
    try:
        shape = np.shape(container)
    except ValueError:  # ragged
        return None
    return shape if len(leaves) == int(np.prod(shape)) else None


# What `eqx.filter_jit` traces (everything else it hashes).
is_array = is_traced_leaf
