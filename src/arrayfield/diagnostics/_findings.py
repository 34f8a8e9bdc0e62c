"""What an audit returns: `Finding` (one hazard, or one leaf that differs between
two trees) and `Findings` (a list of them that prints as a report grouped by
kind). `_audit` finds them; this module only holds and shows them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from .._errors import short_repr
from ._paths import is_array
from ._signature import leaf_text

EQX = "eqx.filter_jit"
AF = "af.filter_jit"
Jit = Literal["eqx.filter_jit", "af.filter_jit"]

# Report order, and the heading of each group.
KINDS = {
    "python-scalar": "Python scalars in traced positions: filter_jit hashes each "
    "value, so every new value compiles again, and 1, 1.0 and True collide",
    "numpy-scalar": "NumPy scalars: traced, but as host values of NumPy's dtype, "
    "copied to the device on every call",
    "hashed-leaf": "Non-array leaves: hashed into filter_jit's cache key, so each "
    "new value (or new object, for closures and partials) compiles again",
    "weak-type": "Weakly typed arrays: typically strong after the first update, "
    "which costs one more compile",
    "static-array": "Arrays in static=True fields: hashed by identity or not "
    "hashable at all, and never traced",
    # The kinds of a two-tree audit: what differs between the trees.
    "structure": "Structure: shapes, dtypes, weak types or the pytree itself "
    "differ, so both jits compile again",
    "callable": "Callables: hashed by identity in eqx.filter_jit",
    "identity": "Objects compared by identity: every new one is a new cache key",
    "value": "Values: numbers, strings and other hashed values that differ",
}


@dataclasses.dataclass(frozen=True)
class Finding:
    """One hazard: where it is, the value found there, its kind, and what to do.

    In a one-tree audit, `kind` is one of `"python-scalar"`, `"numpy-scalar"`,
    `"hashed-leaf"`, `"weak-type"` and `"static-array"`. In a two-tree audit,
    `af.audit(tree, other)`, a finding is a leaf that differs between the trees
    and would compile a jitted function again: `kind` is `"structure"` (a shape,
    dtype, weak type or the pytree structure), `"callable"`, `"identity"` (an
    object compared by identity) or `"value"` (a number, string or other value);
    `value` is the leaf in `tree` and `other` the leaf in `other` (`None` where
    the leaf does not exist: a pytree never has `None` as a leaf), `why` says why
    it is a new cache key, and `recompiles` names the jits certain to compile
    again for it: `("eqx.filter_jit", "af.filter_jit")` for a new shape, dtype or
    structure, `("eqx.filter_jit",)` for any other leaf, which `af.filter_jit`
    traces again and compiles only if the new trace is a different program.

    `field` names the Module field that holds the value (or that the value is
    inside, for a list element) and where it is declared,
    `"Source.flux (scene.py:12)"`; empty when the value is in no Module field.

    !!! example

        ```python
        import arrayfield as af

        (finding,) = af.audit({"lr": 0.1}, name="config")
        assert finding.path == 'config["lr"]' and finding.kind == "python-scalar"
        assert "jnp.asarray" in finding.hint
        ```
    """

    path: str
    value: Any
    kind: str
    hint: str
    field: str = ""
    other: Any = None
    why: str = ""
    recompiles: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.recompiles:
            old, new = value_text(self.value), value_text(self.other)
            return f"{self.path}: {old} -> {new}: {self.hint}"
        weak = "weak " if self.kind == "weak-type" else ""
        return f"{self.path} = {weak}{value_text(self.value)}: {self.hint}"


def check_jit(jit: Any) -> None:
    if jit not in (EQX, AF):
        raise ValueError(
            f"jit={jit!r}: af.audit knows the cache keys of 'eqx.filter_jit' and "
            "'af.filter_jit'; pass one of those two strings."
        )


def value_text(value: Any) -> str:
    if value is None:
        return "(absent)"
    return short_repr(value) if is_array(value) else leaf_text(value)


class Findings(list[Finding]):
    """The findings of one `af.audit`; prints as a report grouped by kind.

    A two-tree audit prints one line per cause (a field whose leaves differ in
    the same way counts once), and `compiling(jit)` keeps the findings that
    compile that jit again.

    !!! example

        ```python
        import jax.numpy as jnp
        import arrayfield as af

        print(af.audit({"w": jnp.ones(3, dtype=jnp.float32)}, name="params"))
        ```

        Output:

        ```text
        af.audit: params is clean: no recompile hazards found.
        ```
    """

    def __init__(
        self,
        findings: list[Finding] = (),  # type: ignore[assignment]
        name: str = "tree",
        causes: dict[int, tuple[int, str]] | None = None,
        two_trees: bool = False,
        programs_read: bool = False,
    ):
        super().__init__(findings)
        self.name = name
        self.two_trees = two_trees
        # Whether `recompiles` was read off the programs a function traces to
        # (`audit(..., fn=step)`), so exact for af.filter_jit too.
        self.programs_read = programs_read
        # A two-tree report's causes: id(finding) -> (cause number, its line).
        self._causes = causes or {}

    def compiling(self, jit: Jit = EQX) -> Findings:
        """The findings that make `jit` compile again (all of them for
        `"eqx.filter_jit"`; without those `af.filter_jit` shares for
        `"af.filter_jit"`). Meant for a two-tree audit."""
        check_jit(jit)
        kept = [f for f in self if not f.recompiles or jit in f.recompiles]
        return Findings(
            kept, self.name, self._causes, self.two_trees, self.programs_read
        )

    def __str__(self) -> str:
        if self.two_trees:
            return self._two_tree_report()
        if not self:
            return f"af.audit: {self.name} is clean: no recompile hazards found."
        count = len(self)
        lines = [
            f"af.audit: {count} recompile hazard{'s' if count > 1 else ''} "
            f"in {self.name}"
        ]
        for kind, heading in KINDS.items():
            group = [f for f in self if f.kind == kind]
            if group:
                lines.append(f"{kind} ({len(group)}): {heading}.")
                lines.extend(f"  {finding}" for finding in group)
        return "\n".join(lines)

    def _two_tree_report(self) -> str:
        if not self:
            return (
                f"af.audit: the other {self.name} compiles nothing again: every "
                "leaf is alike for eqx.filter_jit and af.filter_jit."
            )
        on_af = sum(AF in f.recompiles for f in self)
        count = len(self)
        if self.programs_read:
            on_af_text = f"{on_af} for {AF} (read off the programs the step traces to)"
        else:
            on_af_text = (
                f"{on_af} certainly for {AF} (a new shape, dtype or structure); "
                "for the others it traces again and compiles only where the "
                "trace is a new program, which audit(tree, other, fn=step) reads"
            )
        lines = [
            f"af.audit: the other {self.name} compiles again: {count} "
            f"lea{'ves' if count > 1 else 'f'} differ{'' if count > 1 else 's'} "
            f"for {EQX}; {on_af_text}"
        ]
        for kind, heading in KINDS.items():
            causes: dict[int, str] = {}  # in the order of their first finding
            for f in self:
                if f.kind == kind and id(f) in self._causes:
                    number, line = self._causes[id(f)]
                    causes.setdefault(number, line)
            if causes:
                lines.append(f"{kind}: {heading}.")
                lines.extend(f"  {line}" for line in causes.values())
        return "\n".join(lines)
