"""`af.normalize`: re-convert the fields of Modules built without `__init__`."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import jax

from ._declare import field_converters
from ._facts import is_module

_T = TypeVar("_T")


def normalize(tree: _T) -> _T:
    """Re-convert every `ArrayModule` / `af.field` field in a pytree.

    Use it on trees built without `__init__`: `eqx.tree_at(lambda m: m.x, m, 5.0)`,
    `jax.tree_util.tree_unflatten`, deserialisation, hand-edited checkpoints. Works on
    any pytree (lists, dicts, optax states...) containing such modules, at any depth.
    Nothing is copied that does not change: `normalize(normalize(t))` returns the
    very same objects as `normalize(t)`.

    **Arguments:**

    - `tree`: any pytree.

    **Returns:**

    The same tree with converted fields; unchanged subtrees are the same objects.

    **Raises:**

    `af.ConversionError`, as construction would.

    !!! example

        ```python
        import equinox as eqx
        from jaxtyping import Array, Float
        import arrayfield as af

        class Star(af.ArrayModule):
            flux: Float[Array, ""]

        star = eqx.tree_at(lambda s: s.flux, Star(flux=1.0), 5.0)  # a Python float
        star = af.normalize(star)
        assert star.flux.dtype == "float32"
        ```
    """
    nodes, treedef = jax.tree_util.tree_flatten(tree, is_leaf=is_module)
    normalized = [_normalize_node(node) for node in nodes]
    if all(new is old for new, old in zip(normalized, nodes, strict=True)):
        return tree  # nothing changed: keep every container, not a rebuilt copy
    return jax.tree_util.tree_unflatten(treedef, normalized)


def _normalize_node(node: Any) -> Any:
    if not is_module(node):
        return node
    converters = field_converters(type(node))
    updates = {}
    for f in dataclasses.fields(node):
        old = node.__dict__.get(f.name, dataclasses.MISSING)
        if old is dataclasses.MISSING or f.metadata.get("static", False):
            continue
        new = normalize(old)
        converter = converters.get(f.name)
        if converter is not None:
            new = converter.store(new)
        if new is not old:
            updates[f.name] = new
    if not updates:
        return node
    rebuilt = object.__new__(type(node))
    for key, value in {**node.__dict__, **updates}.items():
        object.__setattr__(rebuilt, key, value)
    return rebuilt
