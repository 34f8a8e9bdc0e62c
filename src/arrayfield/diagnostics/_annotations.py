"""A field's annotation as an object, read without running the code in it.

A plain `eqx.Module` written under `from __future__ import annotations` keeps its
annotations as strings, and equinox never evaluates them; `eval` would run any call
an annotation holds (`"Float[Array, boom()]"`). The diagnostics read such a string
with `ast` instead: names (looked up as `eval` would, in the class body, the
module's globals, then the builtins), attributes of modules and classes, subscripts
and `X | Y`. Anything else leaves the annotation unresolved, and the diagnostics
then give the advice they give for an annotation they cannot read.
"""

from __future__ import annotations

import ast
import builtins
import sys
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Union

from .._declare import field_converters
from .._spec import Unresolved
from ._paths import PARSING, FieldRef


def field_annotation(field: FieldRef) -> Any:
    """The annotation of `field` as an object; raises `Unresolved` if it cannot
    be read without running code. A field arrayfield converts was resolved when
    its class was made: that object is used, and nothing is read again."""
    converter = field_converters(field.owner).get(field.name)
    if converter is not None and converter.resolved is not None:
        return converter.resolved
    return read_annotation(field.annotation, field.declared_in)


def read_annotation(annotation: Any, owner: type | None) -> Any:
    """`annotation` (a string, a `ForwardRef` or an object) as an object, its
    names resolved where `owner`'s body wrote it; `Unresolved` for an annotation
    that only running code could resolve (a call, a lambda, an f-string, ...)."""
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        try:
            with PARSING:
                tree = ast.parse(annotation.strip(), mode="eval")
        except SyntaxError as error:
            raise Unresolved(f"SyntaxError: {error.msg}") from None
        scopes = _scopes(owner)
        return read_annotation(_value(tree.body, scopes), owner)
    args = typing.get_args(annotation)
    if any(isinstance(a, str | typing.ForwardRef) for a in args) and (
        typing.get_origin(annotation) in (Union, types.UnionType)
    ):
        members = tuple(read_annotation(a, owner) for a in args)
        return Union[members]  # noqa: UP007
    return annotation


def _scopes(owner: type | None) -> tuple[Mapping[str, Any], ...]:
    """Where a name in `owner`'s body is looked up, in `eval`'s order."""
    module = sys.modules.get(owner.__module__) if owner is not None else None
    return (
        dict(vars(owner)) if owner is not None else {},
        dict(vars(module)) if module is not None else {},
        vars(builtins),
    )


_MISSING = object()


def _value(node: ast.expr, scopes: tuple[Mapping[str, Any], ...]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        for scope in scopes:
            value = scope.get(node.id, _MISSING)
            if value is not _MISSING:
                return value
        raise Unresolved(f"NameError: name {node.id!r} is not defined")
    if isinstance(node, ast.Attribute):
        return _attribute(_value(node.value, scopes), node.attr)
    if isinstance(node, ast.Subscript):
        target = _value(node.value, scopes)
        if not _subscriptable(target):
            raise Unresolved(f"cannot subscript {type(target).__name__} safely")
        if target is Annotated and isinstance(node.slice, ast.Tuple):
            index = _annotated(node.slice, scopes)  # Annotated[float, Gt(0)]
        else:
            index = _value(node.slice, scopes)
        try:
            return target[index]
        except Exception as error:
            raise Unresolved(f"{type(error).__name__}: {error}") from None
    if isinstance(node, ast.Tuple):
        return tuple(_value(element, scopes) for element in node.elts)
    if isinstance(node, ast.List):  # Callable[[int], int]
        return [_value(element, scopes) for element in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _value(node.left, scopes), _value(node.right, scopes)
        try:
            return Union[left, right]  # noqa: UP007
        except TypeError as error:
            raise Unresolved(f"TypeError: {error}") from None
    raise Unresolved(f"{type(node).__name__} is not read without running code")


class _Unread:
    """Metadata of an `Annotated` that only running code could read (a call):
    what arrayfield reads of an `Annotated` is its first argument alone."""

    def __repr__(self) -> str:
        return "<unread>"


_UNREAD = _Unread()


def _annotated(index: ast.Tuple, scopes: tuple[Mapping[str, Any], ...]) -> tuple:
    """`Annotated`'s arguments: the type, read or `Unresolved`, then each piece
    of metadata, read where it can be and `_UNREAD` where not."""
    kind, *metadata = index.elts
    read = [_value(kind, scopes)]
    for node in metadata:
        try:
            read.append(_value(node, scopes))
        except Unresolved:
            read.append(_UNREAD)
    return tuple(read)


def _attribute(target: Any, name: str) -> Any:
    """`target.name` for a module or a class, read from their namespaces (no
    module `__getattr__`, no descriptor runs)."""
    if isinstance(target, types.ModuleType):
        value = vars(target).get(name, _MISSING)
        if value is not _MISSING:
            return value  # `jnp.array` too: a module's functions are not bound
    elif isinstance(target, type):
        for cls in target.__mro__:
            value = vars(cls).get(name, _MISSING)
            if value is _MISSING:
                continue
            if hasattr(type(value), "__get__") and not isinstance(value, type):
                raise Unresolved(f"{name} is a descriptor: reading it runs code")
            return value
    else:
        raise Unresolved(f"cannot read .{name} of {type(target).__name__} safely")
    raise Unresolved(f"AttributeError: no attribute {name!r}")


def _subscriptable(target: Any) -> bool:
    """Classes (`list`, jaxtyping's `Float`) and typing's forms (`Optional`,
    `Callable`, an alias such as `list[int]`): subscripting them builds a type."""
    return isinstance(target, type) or type(target).__module__ in (
        "typing",
        "typing_extensions",
        "types",
    )
