"""Comparing two call signatures: which leaves changed, and why each matters."""

from __future__ import annotations

import dataclasses
import re

from .._errors import short_repr
from .._facts import PYTHON_NUMBERS
from ._hints import STRUCTURE_FIX, leaf_reason, opted_out
from ._paths import FieldRef
from ._signature import LeafSig, Signature, equal


@dataclasses.dataclass(frozen=True)
class Change:
    """One leaf whose cache-key entry differs between two calls (or trees).

    `old`/`new` are the texts shown; `cause` as in `_hints.Reason`;
    `field` is the Module field holding the leaf, or the one it is inside.
    """

    path: str
    old: str
    new: str
    why: str
    fix: str
    cause: str = "structure"
    field: FieldRef | None = None
    kept: bool = False  # a number a trial trace showed must stay a number


def diff(
    old: Signature, new: Signature, jit: str | None, scalar_values: bool = False
) -> list[Change]:
    changes: list[Change] = []
    for path, n in new.leaves.items():
        o = old.leaves.get(path)
        if o is None:
            changes.append(_absent(path, "(absent)", n.text, _APPEARED, old, n))
        elif not o.same(n):
            reason = leaf_reason(o, n, jit)
            new_text = n.text
            if new_text == o.text and n.kind != "array":
                new_text += " (a new object)"  # e.g. a fresh functools.partial
            changes.append(
                Change(
                    path,
                    o.text,
                    new_text,
                    reason.why,
                    reason.fix,
                    reason.cause,
                    n.named_by or o.named_by,
                )
            )
        elif scalar_values and n.scalar is not None and not equal(o.scalar, n.scalar):
            changes.append(
                Change(
                    path,
                    o.text,
                    n.text,
                    "value changed; jax.jit traces a Python number unless its "
                    "argument is static (static_argnums/static_argnames), and a "
                    "static argument's value is hashed into the cache key",
                    _with_field(
                        "pass an array, jnp.asarray(x), if the value changes per call",
                        n.named_by,
                    ),
                    "value",
                    n.named_by,
                )
            )
    for path, o in old.leaves.items():
        if path not in new.leaves:
            changes.append(_absent(path, o.text, "(absent)", _DISAPPEARED, new, o))
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


# A list index in a path; its group is the index alone (`pattern` splits on it).
_INDEX = re.compile(r"\[(\d+)\]")
# Where the argument a path starts from ends: `opt_state` of `opt_state[0].mu`.
_ROOT = re.compile(r"[.\[]")


def number_advised(change: Change, new: Signature) -> bool:
    """Whether the change is a Python number hashed into the cache key, whose
    fix would make it an array (not one kept a number by `af.field(convert=
    False)`, or static: a static field's advice is conditional already)."""
    leaf = new.leaves.get(change.path)
    return (
        change.cause == "value"
        and leaf is not None
        and leaf.kind == "hashed"
        and type(leaf.key) in PYTHON_NUMBERS
        and not opted_out(change.field)
    )


def _structure_fix(path: str, other: Signature) -> str:
    """The fix for a leaf at `path` that `other` lacks: where an element of a
    list or tuple is what came or went (`sources[3]`), the sequence changed
    length, which padding handles as it does shapes; else the general fix."""
    for index in _INDEX.finditer(path):
        element = path[: index.end()]
        if not any(p.startswith(element) for p in other.leaves):
            sequence = path[: index.start()]
            return (
                f"{sequence} has another length: each length is another structure "
                "and compiles again. Pad it to a few common lengths (unused "
                "elements masked out), as for shapes, or stack its elements into "
                "one array field"
            )
    return STRUCTURE_FIX


def _with_field(fix: str, field: FieldRef | None) -> str:
    return fix if field is None else fix + field.named


_APPEARED = (
    "pytree structure changed: this leaf appeared (it was None, "
    "or the field, key or element did not exist)"
)
_DISAPPEARED = (
    "pytree structure changed: this leaf disappeared (it is None "
    "now, or the field, key or element is gone)"
)


def _absent(
    path: str, old: str, new: str, why: str, other: Signature, leaf: LeafSig
) -> Change:
    """A leaf that only one of the two calls has (`other` lacks it)."""
    fix = _with_field(_structure_fix(path, other), leaf.named_by)
    return Change(path, old, new, why, fix, field=leaf.named_by)


# How many leaves of one cause the details list one by one.
DETAILED = 3


def cause_of(change: Change) -> tuple:
    """What makes two changes one cause: one field (or one path, list indices
    aside, for leaves that are no field's), one kind of cause and one fix."""
    f = change.field
    # A field by its class's name, not the class object: a class made anew per
    # call (a library's per-fit parameter Module) is one cause every time.
    where = (
        _INDEX.sub("[*]", change.path)
        if f is None
        else (f.declared_in.__module__, f.declared_in.__qualname__, f.name)
    )
    return (where, change.cause, change.fix)


def group(changes: list[Change]) -> list[list[Change]]:
    """The changes by cause. Groups keep the order of their first change."""
    groups: dict[tuple, list[Change]] = {}
    for change in changes:
        groups.setdefault(cause_of(change), []).append(change)
    return list(groups.values())


def causes(changes: list[Change]) -> tuple:
    """The causes of a retrace, whatever the values: two retraces with equal
    causes (a learning rate that is a new Python float each step) say the same."""
    return tuple(dict.fromkeys((*cause_of(change), change.why) for change in changes))


def pattern(paths: list[str]) -> str:
    """The paths as one: `scene.sources[*].flux` when they differ only in list
    indices, else the first path and how many more."""
    if len(set(paths)) == 1:
        return paths[0]
    shapes = {_INDEX.sub("[*]", p) for p in paths}
    if len(shapes) != 1:  # say which trees the count covers (an optax state?)
        roots = dict.fromkeys(_ROOT.split(p, maxsplit=1)[0] for p in paths[1:])
        return f"{paths[0]} and {len(paths) - 1} more, in {', '.join(roots)}"
    pieces = [_INDEX.split(p) for p in paths]  # text, index, text, index, ...
    merged = []
    for i, part in enumerate(pieces[0]):
        if i % 2 == 0:
            merged.append(part)
        elif all(p[i] == part for p in pieces):
            merged.append(f"[{part}]")
        else:
            merged.append("[*]")
    return "".join(merged)


def in_words(changes: list[Change]) -> str:
    """The causes of a retrace in a few words: the paths of their leaves."""
    if not changes:
        return "outside the arguments"
    return ", ".join(pattern([c.path for c in g]) for g in group(changes))


def cause_text(changes: list[Change]) -> str:
    """One line for one cause: `path (Class.field at file:line): old -> new;
    fix: ...`, with the leaf count when several leaves share it."""
    first = changes[0]
    where, fix = "", first.fix
    if first.field is not None:  # the line names the field once, up front
        where = f" ({first.field.at})"
        fix = fix.removesuffix(first.field.named)
    what = f"{first.old} -> {first.new}"
    if len(changes) > 1:
        what = f"{len(changes)} leaves, e.g. {what}"
    return f"{pattern([c.path for c in changes])}{where}: {what}; fix: {fix}"


def summary(changes: list[Change]) -> list[str]:
    """The summary lines, then the details: each cause's why and fix once."""
    groups = group(changes)
    count = len(groups)
    lines = [f"{count} cause{'s' if count > 1 else ''}:"]
    lines.extend(f"  {cause_text(g)}" for g in groups)
    lines.append("Details:")
    for g in groups:
        first = g[0]
        lines.append(f"  {first.path}: {first.old} -> {first.new}")
        lines.append(f"    why: {first.why}.")
        lines.append(f"    fix: {first.fix}.")
        for c in g[1:DETAILED]:
            lines.append(f"  {c.path}: {c.old} -> {c.new} (as {first.path})")
        if len(g) > DETAILED:
            lines.append(f"  ... and {len(g) - DETAILED} more, as {first.path}")
    return lines
