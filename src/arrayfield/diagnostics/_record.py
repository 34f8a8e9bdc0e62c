"""The record of one watched function: the signatures of its calls that traced,
compared on each new trace, and the check for silently reused traces."""

from __future__ import annotations

import dataclasses
import sys
import threading
import weakref
from typing import Any

import jax.tree_util as jtu

from .. import _eqx_private
from .._errors import (
    EQUINOX_DIR,
    JAX_DIR,
    RetraceNote,
    RetraceWarning,
    TraceReuseWarning,
    warn_in_user_code,
)
from . import _trial
from ._diff import (
    Change,
    cause_of,
    cause_text,
    causes,
    diff,
    group,
    in_words,
    number_advised,
    pattern,
    summary,
)
from ._hints import (
    FILTER_JIT,
    JAX_JIT,
    kept_number_fix,
    number_fix,
    traced_only,
)
from ._paths import (
    bind_arguments,
    function_name,
    installed_file,
    location,
    underlying,
)
from ._program_diff import (
    LITERAL_FIX,
    Program,
    captured_arrays,
    summarize,
    what_is_new,
)
from ._repeats import Repeats, counted, tell
from ._signature import Signature, signature

# How many earlier signatures per function a new trace is compared against.
HISTORY = 32
# How many programs compiled for one Python function a new one is compared with.
PROGRAMS = 8
# The leaf a `with` block adds for the jitted function (`_retrace._watching_call`).
FUNCTION_LEAF = "<function>"


def calling_jit() -> str | None:
    """Which jit is tracing the plain function whose wrapper called this."""
    caller = sys._getframe(2).f_code.co_filename  # the wrapper's caller
    if caller.startswith(EQUINOX_DIR) or _eqx_private.is_jit_wrapper_file(caller):
        return FILTER_JIT
    if caller.startswith(JAX_DIR):
        return JAX_JIT
    return None  # called from the user's own jitted function: any jit


def _kept(change: Change) -> bool:
    """Whether the change is a number held as a number on purpose: in a static
    field (an origin, a size), or one a trial trace showed cannot be an array
    (a slice start computed with `max()`): no rewrite should make it one."""
    field = change.field
    return change.kept or (
        field is not None and field.field.metadata.get("static", False)
    )


def _on_purpose(changes: list[Change]) -> bool:
    """Whether every change is a number kept a number on purpose."""
    return bool(changes) and all(_kept(c) for c in changes)


def _category(changes: list[Change], numbers: str | None) -> type[UserWarning]:
    """`RetraceNote` where the retrace ran its family's shared program (or
    compiled it, once) and a number kept on purpose changed: that number
    forced the trace, and no other cause cost a compile, so there is nothing
    to fix (a shape that changed would have started a family). Else
    `RetraceWarning`."""
    if (
        numbers in ("shared", "generalised")
        and any(_kept(c) for c in changes)
        and not any(c.cause == "structure" for c in changes)
    ):
        return RetraceNote
    return RetraceWarning


# Said after the advice for a retrace whose program differs from an earlier one
# only in the numbers it embeds (`af.filter_jit(share_numbers=True)`).
_SHARING_NOTE = {
    "could share": (
        "\nIts program differs from one traced before only in the numbers it "
        "embeds: af.filter_jit(..., share_numbers=True) would compile one program "
        "for every such trace{saves}."
    ),
    "new family": (
        "\nIts program starts family {family}: share_numbers=True compiled it "
        "as its own program (results bitwise eqx.filter_jit's); the family's "
        "next trace that differs from it only in the numbers it embeds compiles "
        "one program taking those numbers as inputs, and every later such trace "
        "runs that."
    ),
    "generalised": (
        "\nIts program differs from the first of family {family} only in the "
        "numbers it embeds: share_numbers=True compiled the family's program, "
        "which takes the numbers that differ as inputs, and every later trace "
        "that differs only in those numbers runs it, compiling nothing."
    ),
    "shared": (
        "\nIts program differs from one traced before only in the numbers it "
        "embeds, so it ran the program share_numbers=True compiled for its "
        "family (family {family}{saves})."
    ),
}


def _new_in_program(
    summary: Program,
    earlier: list[Program],
    target: Any,
    changes: list[Change],
    numbers: str | None = None,
) -> str:
    """What the program of a retrace that compiled has that the closest one
    compiled before for the same function had not, as lines to append; nothing
    where the argument changes already say it (other shapes), except for a
    trace that starts a family of its own (`share_numbers`): the changes name
    a static field, but what keeps it apart is where its computation differs
    (a slice of another size: a box clipped at the frame's edge)."""
    found = what_is_new(earlier, summary, function_name(target))
    if found is None or found.kind == "inputs":
        return ""
    lines = list(found.lines)
    if _on_purpose(changes):  # an array cannot hold what sets these literals
        lines = [line for line in lines if not line.startswith(LITERAL_FIX)]
    if found.kind == "computation" and numbers == "new family":
        head = (
            "What keeps it out of the families before, against the closest "
            "program compiled before (numbers alone never start a family)"
        )
    elif found.kind == "computation" and changes:
        return ""
    else:
        head = "What is new in its program, against the closest one compiled before"
        if found.kind == "literals" and changes:
            matching = _matching(changes, found.literals)
            which = f"; {matching} changed to these values" if matching else ""
            head += (
                f" (it differs only in these numbers{which}: of the causes above, "
                "only what set them made a new program, the others a new trace)"
            )
    return "\n" + "\n".join([f"{head}:", *lines])


def _matching(changes: list[Change], literals: tuple[tuple[str, str], ...]) -> str:
    """The changed leaves whose old and new values equal those of a literal that
    differs between the programs, as one path (`_diff.pattern`)."""

    def number(text: str) -> float | None:
        try:
            return float(text)
        except ValueError:
            return None

    pairs = {(number(o), number(n)) for o, n in literals}
    paths = [
        c.path
        for c in changes
        if number(c.old) is not None and (number(c.old), number(c.new)) in pairs
    ]
    return pattern(paths) if paths else ""


class _CodeRecord:
    """What the wrappers of one Python function (one code object: a function
    defined in a loop is a new object each time, with the same code) traced in
    one scope: which function objects (a set of the live ones: a function
    dropped after its loop iteration leaves it), the signatures of their calls
    that traced and the programs they compiled, with which a new function
    object's first compile is compared."""

    __slots__ = ("functions", "programs", "repeats", "signatures", "trials")

    def __init__(self) -> None:
        self.functions: weakref.WeakSet[Any] = weakref.WeakSet()
        self.signatures: list[Signature] = []
        self.programs: list[Program] = []
        self.repeats: Repeats | None = None  # of the new-wrapper warnings
        # Whether a cause's numbers traced as arrays: its `_trial.Refusal`, or
        # None where they did; by cause (`_diff.cause_of`), once per function.
        self.trials: dict[tuple, _trial.Refusal | None] = {}

    def same_arguments_before(self, new: Signature, jit: str | None) -> bool:
        """Whether an earlier function object traced with arguments that `new`
        matches: then only the new function object made this trace (the jitted
        function itself, an extra leaf of the `with` block, aside)."""
        return any(
            all(c.path == FUNCTION_LEAF for c in diff(old, new, jit))
            for old in self.signatures
        )


class Scope:
    """Where functions with the same code are compared: one `with` block (or the
    whole process under the environment switch), or every decorated function."""

    def __init__(self) -> None:
        self.by_code: dict[Any, _CodeRecord] = {}
        self.lock = threading.Lock()

    def tell_repeats(self) -> None:
        """Say now how often new function objects repeated their warning."""
        for record in list(self.by_code.values()):
            tell(record.repeats)

    def record(self, fn: Any, jit: type) -> _CodeRecord | None:
        """The record of the Python function `fn`'s code under jits of type
        `jit` (a program is compared with those of the same jit)."""
        code = getattr(fn, "__code__", None)
        if code is None:
            return None
        with self.lock:
            return self.by_code.setdefault((code, jit), _CodeRecord())


DECORATED = Scope()


class Site:
    """What one watched function has traced with (its last few signatures)."""

    def __init__(
        self,
        fn: Any,
        jit: str | None,
        keep_alive: Any = None,
        scope: Scope = DECORATED,
    ):
        self.fn = fn
        self.scope = scope
        self.jit = jit
        self.traced_scalars = jit == JAX_JIT  # jax.jit traces Python numbers
        self.keep_alive = keep_alive  # pins the object whose id keys this site
        self.history: list[Signature] = []
        self.check_reuse = False
        self.reported: set[tuple[int, tuple[type, ...]]] = set()
        self.lock = threading.Lock()
        self.shared = False  # also used by the `with` block's hook (see _wrap_jitted)
        self.last_trace = -1  # for a plain function: the top-level trace it was in
        # The causes of the last full warning, and the retraces since with those.
        self.repeats: Repeats | None = None
        # The other causes its notes listed one line each: a later note with
        # the same ones names them (a library's per-call objects, every field).
        self.noted: set[tuple] = set()

    def traced(
        self,
        args: tuple,
        kwargs: dict,
        extra: dict[str, Any],
        jit: str | None = None,
        quiet: bool = False,
        compiled: bool = True,
        numbers: str | None = None,
        family: int = 0,
        program: tuple | None = None,
    ) -> bool:
        """This call traced: compare it with the earlier ones, then remember it.

        Returns whether it warned; `quiet` only remembers (an inner wrapper warned).
        `compiled`: whether the call also compiled (af.filter_jit compiles
        nothing for a trace that is a program compiled before). `numbers`:
        "shared" where it ran a program shared by traces that differ only in
        the numbers they embed (`af.filter_jit(share_numbers=True)`), "could
        share" where its program differs from an earlier one only so but the
        wrapper does not share numbers, "new family" where it compiled the
        program of a family of its own, "generalised" where it compiled its
        family's program over the numbers that differ, else None; `family`,
        the number of the family whose program it ran. `program`: `(closed
        jaxpr, jit parameters)` of the program it traced to, where af.filter_jit
        says.
        """
        if _trial.trying():
            return False  # the trial's own trace: no call of the user's
        arguments = {**extra, **bind_arguments(self.fn, args, kwargs)}
        new = signature(arguments, args, kwargs, self.traced_scalars)
        with self.lock:
            history = list(self.history)
            self.history.append(new)
            del self.history[:-HISTORY]
            self.check_reuse = self.check_reuse or new.has_numbers
        target = underlying(self.fn)
        # A plain function traced by some jit (`jit` None) has no wrapper of its
        # own, and whether its trace compiled is not known: not compared.
        record = None if self.jit is None else self.scope.record(target, type(self.fn))
        summary = None
        earlier: list[Program] = []
        new_function = False
        if record is not None:
            with self.scope.lock:
                earlier = list(record.programs)
                if compiled and program is not None:
                    summary = summarize(program, target)
                    if summary is not None:
                        record.programs.append(summary)
                        del record.programs[:-PROGRAMS]
                new_function = target not in record.functions and (
                    record.same_arguments_before(new, jit or self.jit)
                )
                record.functions.add(target)
                record.signatures.append(new)
                del record.signatures[:-HISTORY]
        if not history:
            # A new function object with the code of one that traced with the
            # same arguments before (defined in a loop, or per call): its
            # compile is a cost the user can avoid, told as for a retrace.
            if quiet or not compiled or not new_function or record is None:
                return False
            return self._new_wrapper(record, summary, earlier, target)
        if quiet:
            return False
        jit = jit or self.jit
        # Against the closest earlier call: latest first, so ties go to the latest.
        changes = min((diff(old, new, jit) for old in reversed(history)), key=len)
        if not changes and self.traced_scalars:
            changes = min(
                (diff(old, new, jit, scalar_values=True) for old in history), key=len
            )
        if record is not None:
            changes = self._tried(changes, new, args, kwargs, record, jit, numbers)
        key = (causes(changes), compiled, numbers, family)
        category = _category(changes, numbers)

        def repeats() -> Repeats:
            where, what = location(self.fn), in_words(changes)
            return Repeats(where, key, what, compiled, numbers, category)

        if counted(self, self.lock, key, repeats):
            return True
        message = self._message(changes, compiled, numbers, family)
        # A note (numbers shared on purpose) says all there is: the program's
        # numbers differ, and no fix applies.
        if summary is not None and earlier and category is not RetraceNote:
            message += _new_in_program(summary, earlier, target, changes, numbers)
        warn_in_user_code(category(message))
        return True

    def _new_wrapper(
        self,
        record: _CodeRecord,
        summary: Program | None,
        earlier: list[Program],
        target: Any,
    ) -> bool:
        """The first trace of this wrapper compiled, where another wrapper of
        the same function traced before: what made the program new."""
        where = location(self.fn)
        name = function_name(target)
        jit = "af.filter_jit" if summary is not None else "jit"
        head = (
            f"{where} was traced and compiled by a new {jit} wrapper; another "
            "wrapper of the same function (a function defined anew in a loop or "
            "per call has the same code) traced it before."
        )
        if summary is not None:
            found = what_is_new(earlier, summary, name)
            if found is None or found.kind == "inputs":
                return False  # another shape, or no program to compare with
            lines = [
                f"{head} Its program differs from the closest one compiled before "
                f"for {name} in:",
                *found.lines,
            ]
            causes_key: tuple = (found.kind, found.names)
            what = ", ".join(f"captured {n}" for n in found.names) or found.kind
        else:
            arrays = captured_arrays(target)
            lines = [
                f"{head} {self.jit} traces and compiles each new function "
                "object anew, whatever it computes."
            ]
            if arrays:
                lines.append(
                    f"  it captures arrays: {', '.join(arrays[:3])}"
                    + (f" and {len(arrays) - 3} more" if len(arrays) > 3 else "")
                    + "; jit embeds a captured array in the program as a constant, "
                    "so each new array is a new program, under af.filter_jit too."
                )
                lines.append(
                    f"    fix: define {name} once, outside the loop, and pass the "
                    "arrays it captures as arguments: one compile serves them all."
                )
            else:
                lines.append(
                    f"    fix: define {name} once, outside the loop, or jit it with "
                    "af.filter_jit, which runs the program compiled before where a "
                    "new trace is the same program."
                )
            causes_key = ("new function", tuple(arrays))
            what = "a new function object"
        key = (causes_key, True, None)
        if counted(
            record, self.scope.lock, key, lambda: Repeats(where, key, what, True, None)
        ):
            return True
        warn_in_user_code(RetraceWarning("\n".join(lines)))
        return True

    def _tried(
        self,
        changes: list[Change],
        new: Signature,
        args: tuple,
        kwargs: dict,
        record: _CodeRecord,
        jit: str | None,
        numbers: str | None,
    ) -> list[Change]:
        """`changes`, with the fix of Python numbers that cannot be arrays (a
        trial trace with them as arrays raised) replaced by keeping them
        numbers: advice is given only where it works when followed."""
        name = function_name(self.fn)
        kept: dict[str, str] = {}  # path -> the fix that keeps it a number
        for g in group(changes):
            paths = frozenset(c.path for c in g if number_advised(c, new))
            if not paths:
                continue
            cause = cause_of(g[0])[:2]  # the field (or path) and kind of cause
            with self.scope.lock:
                tried = cause in record.trials
                refused = record.trials.get(cause)
            if not tried:
                refused = _trial.as_arrays(self.fn, args, kwargs, paths)
                with self.scope.lock:
                    record.trials[cause] = refused
            if refused is not None:
                fix = kept_number_fix(str(refused), name, jit, numbers)
                kept.update(dict.fromkeys(paths, fix))
        if not kept:
            return changes
        return [
            c
            if c.path not in kept
            else dataclasses.replace(
                c,
                fix=kept[c.path] + (c.field.named if c.field is not None else ""),
                kept=True,
            )
            for c in changes
        ]

    def tell_repeats(self) -> None:
        """Say now how often the causes of the last full warning repeated."""
        tell(self.repeats)

    def _message(
        self, changes: list[Change], compiled: bool, numbers: str | None, family: int
    ) -> str:
        changed = (
            f"Compared with the closest earlier call, {in_words(changes)} changed."
        )
        # A number kept a number on purpose (a static origin, or one a trial
        # trace showed cannot be an array): where only such numbers changed,
        # sharing numbers is the answer, not a rewrite. Any other number the
        # user can pass as an array, which saves the trace too: its advice
        # stands, and sharing is said after it.
        on_purpose = _on_purpose(changes)
        if numbers == "could share" and on_purpose:
            return (
                f"{location(self.fn)} was traced and compiled again, and its "
                "program differs from one traced before only in the numbers it "
                "embeds (literals, where slices start and blocks are placed). "
                "af.filter_jit(..., share_numbers=True) would compile one "
                "program for every such trace, which takes the numbers as "
                "inputs, with no change to the code (its results may then "
                "differ from eqx.filter_jit's in the last bits). "
                f"{changed}"
            )
        if _category(changes, numbers) is RetraceNote:
            return self._note(changes, numbers, family)
        # The advice saves the trace too, unless it keeps numbers numbers.
        saves = (
            ""
            if any(_kept(c) for c in changes)
            else "; the advice above saves the trace too"
        )
        if numbers == "could share" and not saves:
            saves = ", with no change to the code"
        note = _SHARING_NOTE.get(numbers or "", "").format(family=family, saves=saves)
        return self._advice(changes, compiled) + note

    def _note(self, changes: list[Change], numbers: str | None, family: int) -> str:
        """A retrace that shared its family's program and had to trace (a
        number kept a number changed): what happened, and its causes in a line
        each; nothing to fix."""
        if numbers == "shared":
            head = (
                f"{location(self.fn)} was traced again, and its program differs "
                "from one traced before only in the numbers it embeds: numbers "
                f"differ: shared. It joined family {family}, whose program takes "
                "the numbers as inputs and was compiled before, so this call "
                "compiled nothing; nothing needs to change."
            )
        else:
            head = (
                f"{location(self.fn)} was traced again, and its program differs "
                f"from the first of family {family} only in the numbers it "
                "embeds: numbers differ: shared. share_numbers=True compiled the "
                "family's program, which takes the numbers that differ as "
                "inputs, once: later traces that differ only in those compile "
                "nothing; nothing needs to change. (A family: the programs of a "
                "function that differ only in the numbers they embed, which "
                "share_numbers=True runs as one program after its first.)"
            )
        changed = (
            f"Compared with the closest earlier call, {in_words(changes)} changed."
        )
        others = [g for g in group(changes) if not _kept(g[0])]
        if not others:
            return f"{head} {changed}"
        kept = in_words([c for c in changes if _kept(c)])
        head += f" It traced because {kept} changed, numbers that must stay numbers."
        other_changes = [c for g in others for c in g]
        listed = causes(other_changes)
        with self.lock:
            told = listed in self.noted
            self.noted.add(listed)
        if told:
            other = in_words(other_changes)
            return (
                f"{head} Its other causes are those a note above listed ({other}): "
                "each would cost a trace where those stay the same, and no compile "
                "while the program is shared."
            )
        return "\n".join(
            [
                f"{head} Its other causes would each cost a trace where those stay "
                "the same, and no compile while the program is shared:",
                *(f"  {cause_text(g)}" for g in others),
            ]
        )

    def _advice(self, changes: list[Change], compiled: bool) -> str:
        head = f"{location(self.fn)} was traced and compiled again."
        if not compiled:
            head = (
                f"{location(self.fn)} was traced again, but compiled nothing: the "
                "trace is a program compiled before (af.filter_jit ran that "
                "executable, or JAX read it from its persistent cache), so the "
                "cost was the trace alone."
            )
        if not changes:
            causes = (
                "a new jit wrapper around the same function (eqx.filter_jit or "
                "jax.jit called inside a loop), jax.clear_caches(), or different "
                "jit options"
            )
            if self.jit is None:
                causes = (
                    "the jitted function that calls it was traced again for its "
                    f"own arguments, {causes}"
                )
            return (
                f"{head} No argument differs from an earlier call that traced, so "
                f"the cause is outside the arguments: {causes}."
            )
        if not compiled:  # the whys say what the change cost: a trace
            changes = [dataclasses.replace(c, why=traced_only(c.why)) for c in changes]
        lines = summary(changes)
        lines[0] = f"{head} Compared with the closest earlier call, {lines[0]}"
        return "\n".join([*lines, *self._whose()])

    def _whose(self) -> list[str]:
        """Where the jitted function is an installed package's: whose fixes
        the fixes above are (the package builds much of what it passes)."""
        target = underlying(self.fn)
        code = getattr(target, "__code__", None)
        if code is None or not installed_file(code.co_filename):
            return []
        package = getattr(target, "__module__", "") or ""
        package = package.partition(".")[0] or "an installed package"
        return [
            f"{target.__name__} is defined in the installed package {package}: "
            f"what {package} makes anew on each call (its own objects, "
            "closures and names) is for its maintainers to fix; yours is what "
            f"you pass to {package}, and the jit you call it under."
        ]

    def check_hit(self, args: tuple, kwargs: dict) -> None:
        """This call hit the cache: did it reuse a trace made for other types?"""
        flat, treedef = jtu.tree_flatten((args, kwargs))
        for old in reversed(self.history):  # the latest trace is the one cached
            if old.reused_by(flat, treedef):
                break
        else:
            return  # no trace matches: evicted from the history, or not seen
        types = tuple(type(flat[i]) for i, _, _ in old.hashed)
        if not old.has_numbers or types == tuple(t for _, _, t in old.hashed):
            return
        with self.lock:
            key = (id(old), types)
            if key in self.reported:
                return
            self.reported.add(key)
        new = signature(bind_arguments(self.fn, args, kwargs), args, kwargs, False)
        lines = [
            f"{location(self.fn)} reused a trace compiled for arguments of other "
            "types (no retrace happened):"
        ]
        for path, n in new.leaves.items():
            o = old.leaves.get(path)
            if o is None or n.kind != "hashed" or o.type is n.type:
                continue
            lines.append(
                f"  {path}: traced with {o.type.__name__} {o.text}, called with "
                f"{n.type.__name__} {n.text}"
            )
            lines.append(
                "    why: 1, 1.0 and True are equal and hash alike, so filter_jit "
                "runs the trace compiled for the earlier type; results follow "
                "that type's dtype."
            )
            lines.append(f"    fix: {number_fix(n.field)}.")
        warn_in_user_code(TraceReuseWarning("\n".join(lines)))
