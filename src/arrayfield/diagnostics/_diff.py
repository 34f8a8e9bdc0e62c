"""Comparing two call signatures: which leaves changed, and why each matters."""

from __future__ import annotations

import dataclasses

from .._errors import short_repr
from ._hints import STRUCTURE_FIX, leaf_reason
from ._signature import Signature, equal


@dataclasses.dataclass(frozen=True)
class Change:
    path: str
    old: str
    new: str
    why: str
    fix: str


def diff(
    old: Signature, new: Signature, jit: str | None, scalar_values: bool = False
) -> list[Change]:
    changes: list[Change] = []
    for path, n in new.leaves.items():
        o = old.leaves.get(path)
        if o is None:
            changes.append(
                Change(
                    path,
                    "(absent)",
                    n.text,
                    "pytree structure changed: this leaf appeared (it was None, "
                    "or the field, key or element did not exist)",
                    STRUCTURE_FIX,
                )
            )
        elif not o.same(n):
            why, fix = leaf_reason(o, n, jit)
            new_text = n.text
            if new_text == o.text and n.kind != "array":
                new_text += " (a new object)"  # e.g. a fresh functools.partial
            changes.append(Change(path, o.text, new_text, why, fix))
        elif scalar_values and n.scalar is not None and not equal(o.scalar, n.scalar):
            changes.append(
                Change(
                    path,
                    o.text,
                    n.text,
                    "value changed; jax.jit traces a Python number unless its "
                    "argument is static (static_argnums/static_argnames), and a "
                    "static argument's value is hashed into the cache key",
                    "pass an array, jnp.asarray(x), if the value changes per call",
                )
            )
    for path, o in old.leaves.items():
        if path not in new.leaves:
            changes.append(
                Change(
                    path,
                    o.text,
                    "(absent)",
                    "pytree structure changed: this leaf disappeared (it is None "
                    "now, or the field, key or element is gone)",
                    STRUCTURE_FIX,
                )
            )
    if not changes:
        for name, treedef in new.structure.items():
            before = old.structure.get(name)
            if before is not None and before != treedef:
                old_text, new_text = short_repr(before, 120), short_repr(treedef, 120)
                same_names = str(before) == str(treedef)
                changes.append(
                    Change(
                        name,
                        old_text,
                        new_text,
                        "pytree structure changed: same class names, different "
                        "class objects (a class made anew, e.g. by type(...) in "
                        "a function, on every call)"
                        if same_names
                        else "pytree structure changed (container types or the "
                        "order of keys), with the same leaves",
                        "make each class once, at module level or in a "
                        "functools.cache'd factory"
                        if same_names
                        else STRUCTURE_FIX,
                    )
                )
    return changes


def closest(
    history: list[Signature], new: Signature, jit: str | None
) -> tuple[Signature, list[Change]]:
    best: tuple[Signature, list[Change]] | None = None
    for old in reversed(history):  # latest first, so ties go to the latest
        changes = diff(old, new, jit)
        if best is None or len(changes) < len(best[1]):
            best = (old, changes)
    assert best is not None
    return best
