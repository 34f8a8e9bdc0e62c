"""Which differences between two trees change the program a function traces to.

`af.audit(tree, other, fn=step)` answers what `af.filter_jit` would compile: it
traces `step` on both trees, as `af.filter_jit` traces a new cache key (arrays
traced, every other leaf static), and compares the two programs by the rule
`af.filter_jit` shares compiles by (`_program_key`). Where they differ, each
differing leaf is tried alone: `other`'s leaf put into `tree` and traced again,
so a leaf is reported as compiling again only if the program depends on it. The
traces run `step`'s Python, as `af.filter_jit` would at these calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.tree_util as jtu

from .. import _eqx_private, _jax_private, _numbers
from .._program_key import program_key


def _trace(fn: Callable[..., Any], tree: Any) -> Any:
    """`fn(tree)` traced with its arrays as inputs and every other leaf static."""
    leaves, treedef = jtu.tree_flatten(tree)
    arrays = [x if _eqx_private.is_traced_leaf(x) else None for x in leaves]

    def traced(arrays: list) -> Any:
        rebuilt = [x if a is None else a for a, x in zip(arrays, leaves, strict=True)]
        out = fn(jtu.tree_unflatten(treedef, rebuilt))
        return eqx.filter(out, _eqx_private.is_traced_leaf)

    traced.__name__ = getattr(fn, "__name__", "fn")
    return jax.jit(traced).trace(arrays)


def program_of(fn: Callable[..., Any], tree: Any) -> tuple:
    """The key of the program `fn(tree)` traces to under `af.filter_jit`'s rule:
    arrays traced, every other leaf static (closed over, so that `==` on user
    objects is never needed here)."""
    return program_key(_trace(fn, tree))


def numbers_only(fn: Callable[..., Any], tree: Any, other: Any) -> bool:
    """Whether the programs `fn` traces to on two trees differ only in the
    numbers and constants they embed, so that
    `af.filter_jit(share_numbers=True)` runs one program for both (`_numbers`)."""
    keys = []
    for t in (tree, other):
        closed, params = _jax_private.traced_program(_trace(fn, t))
        at = _numbers.sites(closed.jaxpr)
        if not at and not closed.consts:
            return False
        keys.append(_numbers.family_key(closed, at, params))
    return keys[0] == keys[1]


def leaves_the_program_reads(
    fn: Callable[..., Any], tree: Any, other: Any, paths: list[int]
) -> tuple[bool, set[int]]:
    """`(programs differ, the leaf indices among `paths` whose change alone makes
    another program)`, for two trees of one structure."""
    base = program_of(fn, tree)
    if program_of(fn, other) == base:
        return False, set()
    leaves, treedef = jtu.tree_flatten(tree)
    other_leaves = jtu.tree_leaves(other)
    read = set()
    for i in paths:
        mixed = list(leaves)
        mixed[i] = other_leaves[i]
        if program_of(fn, jtu.tree_unflatten(treedef, mixed)) != base:
            read.add(i)
    return True, read
