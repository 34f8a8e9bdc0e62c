"""`audit` and `assert_clean`: find recompile hazards in a live pytree, before a jit.

Reads the tree, never changes it. Paths are written as `explain_retraces` writes
them (`_paths.py`), so a finding and a retrace warning about the same leaf match.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any

import jax
import jax.tree_util as jtu
import numpy as np

from .._errors import AuditError, format_annotation, short_repr
from .._internals import PYTHON_NUMBERS
from ._hints import number_fix
from ._paths import is_array, walk

# Report order, and the heading of each group.
_KINDS = {
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
}


@dataclasses.dataclass(frozen=True)
class Finding:
    """One hazard: where it is, the value found there, its kind, and what to do.

    `kind` is one of `"python-scalar"`, `"numpy-scalar"`, `"hashed-leaf"`,
    `"weak-type"` and `"static-array"`. `field` names the Module field that holds
    the value and where it is declared, `"Source.flux (scene.py:12)"`, or is empty
    when the value is not directly a field's.

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
    # The Module field holding the value, as `SersicMorphology.n (morphology.py:88)`;
    # empty when the value is not directly a field's (a list element, a dict value).
    field: str = ""

    def __str__(self) -> str:
        weak = "weak " if self.kind == "weak-type" else ""
        return f"{self.path} = {weak}{short_repr(self.value)}: {self.hint}"


class Findings(list[Finding]):
    """The findings of one `af.audit`; prints as a report grouped by kind.

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

    def __init__(self, findings: list[Finding] = (), name: str = "tree"):  # type: ignore[assignment]
        super().__init__(findings)
        self.name = name

    def __str__(self) -> str:
        if not self:
            return f"af.audit: {self.name} is clean: no recompile hazards found."
        count = len(self)
        lines = [
            f"af.audit: {count} recompile hazard{'s' if count > 1 else ''} "
            f"in {self.name}"
        ]
        for kind, heading in _KINDS.items():
            group = [f for f in self if f.kind == kind]
            if group:
                lines.append(f"{kind} ({len(group)}): {heading}.")
                lines.extend(f"  {finding}" for finding in group)
        return "\n".join(lines)


def _is_stable_callable(x: Any) -> bool:
    """A callable whose identity does not change between calls (module-level)."""
    if isinstance(x, functools.partial):
        return False
    if isinstance(x, types.FunctionType):
        return "<lambda>" not in x.__qualname__ and "<locals>" not in x.__qualname__
    return callable(x)


def _leaf_finding(path: str, value: Any, field: Any) -> Finding | None:
    if type(value) in PYTHON_NUMBERS:
        return Finding(path, value, "python-scalar", number_fix(field, value))
    if isinstance(value, np.generic):
        return Finding(
            path,
            value,
            "numpy-scalar",
            "store a JAX array, jnp.asarray(x, dtype=...), or subclass "
            "af.ArrayModule, which converts it",
        )
    if isinstance(value, jax.Array):
        if getattr(value, "weak_type", False):
            return Finding(
                path,
                value,
                "weak-type",
                "create it with an explicit dtype, jnp.asarray(x, dtype=jnp.float32), "
                "or pass the Python number itself to an af.ArrayModule array field, "
                "which stores it strongly typed",
            )
        return None
    if is_array(value) or (callable(value) and _is_stable_callable(value)):
        return None
    if callable(value):
        hint = (
            "a fresh closure, lambda or functools.partial per call is a new cache "
            "key: create it once, or make it an eqx.Module / eqx.Partial"
        )
    else:
        hint = (
            f"a {type(value).__name__} is hashed into the cache key: mark it "
            "eqx.field(static=True) if it is a fixed setting, or keep it out of "
            "the jitted arguments if it changes"
        )
    declared = "" if field is None else field.declared
    return Finding(path, value, "hashed-leaf", hint + declared)


def audit(tree: Any, *, name: str = "tree") -> Findings:
    """Find what would make `eqx.filter_jit` recompile, or reuse a wrong trace.

    Works on any pytree: `eqx.Module`s, `af.ArrayModule`s, optax states, dicts,
    lists, nested in each other.

    **Arguments:**

    - `tree`: the pytree to inspect (typically the model or the whole training
        state you pass to a jitted step).
    - `name`: how paths start, e.g. `name="scene"` gives `scene.sources[1].size`.

    **Returns:**

    `af.Findings`, a list of `af.Finding` (`.path`, `.value`, `.kind`, `.hint`).
    `print(af.audit(tree))` shows a report, one line a finding, grouped by kind:

    - `python-scalar`: a Python `bool`/`int`/`float`/`complex` leaf. The hint says
        whether its field is annotated as an array (subclass `af.ArrayModule`) or
        as a number (re-annotate it, or make it `static=True`).
    - `numpy-scalar`: a NumPy scalar leaf.
    - `hashed-leaf`: a string, closure, lambda, `functools.partial` or other
        object. Module-level functions and other stable callables are not
        reported: they hash the same every call.
    - `weak-type`: a weakly typed JAX array.
    - `static-array`: an array inside a `static=True` field.

    !!! example

        ```python
        import equinox as eqx
        import jax.numpy as jnp
        import arrayfield as af

        class Params(eqx.Module):
            w: jnp.ndarray
            lr: float

        findings = af.audit(Params(w=jnp.ones(3), lr=0.1), name="params")
        assert [(f.path, f.kind) for f in findings] == [("params.lr", "python-scalar")]
        ```
    """
    leaves, statics = walk(tree, name)
    findings = []
    for leaf in leaves:
        finding = _leaf_finding(leaf.path, leaf.value, leaf.field)
        if finding is not None:
            if leaf.field is not None:
                finding = dataclasses.replace(finding, field=leaf.field.location)
            findings.append(finding)
    for static in statics:
        if any(is_array(x) for x in jtu.tree_leaves(static.value)):
            findings.append(
                Finding(
                    static.path,
                    static.value,
                    "static-array",
                    f"{static.field.where} is static=True but holds an array "
                    f"(annotated {format_annotation(static.field.annotation)}): "
                    f"drop static=True so it is traced{static.field.declared}",
                    static.field.location,
                )
            )
    order = list(_KINDS)
    findings.sort(key=lambda f: order.index(f.kind))
    return Findings(findings, name)


def assert_clean(tree: Any, *, name: str = "tree") -> None:
    """Raise `af.AuditError` (an `AssertionError`) with the report unless clean.

    Meant for tests: `af.assert_clean(model)` after building the model.

    !!! example

        ```python
        import jax.numpy as jnp
        import arrayfield as af

        af.assert_clean({"w": jnp.zeros(3), "b": jnp.zeros(())})
        ```
    """
    findings = audit(tree, name=name)
    if findings:
        raise AuditError(str(findings))
