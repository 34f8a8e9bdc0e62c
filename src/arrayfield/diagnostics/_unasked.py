"""af.filter_jit's unasked warning: once per function, when Python numbers among
its arguments made it retrace too often (`ARRAYFIELD_RETRACE_LIMIT`). Its advice
is untried: trying it would trace the user's function once more, unasked."""

from __future__ import annotations

import dataclasses
from typing import Any

from .._errors import RetraceWarning, warn_in_user_code
from ._diff import Change, diff, number_advised, summary
from ._hints import FILTER_JIT
from ._paths import bind_arguments, function_name, location
from ._signature import signature


def _appended(change: Change, text: str) -> Change:
    """`change` with `text` added to its fix, before the field it names."""
    named = change.field.named if change.field is not None else ""
    fix = change.fix.removesuffix(named) if named else change.fix
    return dataclasses.replace(change, fix=fix + text + named)


def warn_static_retraces(
    fn: Any, old: tuple, new: tuple, retraces: int, shares_numbers: bool = False
) -> None:
    """af.filter_jit's warning, unasked and once per function, when `fn` has
    traced `retraces` times because Python numbers among its arguments took new
    values: what changed between the last two such calls (`(args, kwargs)`
    each), why and the fix. Where `fn` shares programs that differ only in
    numbers (`share_numbers=True`), a new value costs a trace, not a compile."""
    old_sig, new_sig = (
        signature(bind_arguments(fn, args, kwargs), args, kwargs, False)
        for args, kwargs in (old, new)
    )
    changes = diff(old_sig, new_sig, FILTER_JIT)
    # Untried advice (trying it would trace the function once more, which an
    # unasked warning must not): an array where a number is needed raises.
    name = function_name(fn)
    share = (
        "share_numbers=True already shares the program over its values"
        if shares_numbers
        else "share the program over its values with af.filter_jit(..., "
        "share_numbers=True)"
    )
    untried = (
        f"; but where {name} uses it as a Python value (a slice start, a size, "
        f"max() or an if), an array raises there: keep it a number and {share} "
        "(af.explain_retraces() tries the array before advising it)"
    )
    changes = [
        _appended(c, untried) if number_advised(c, new_sig) else c for c in changes
    ]
    cost = (
        "a new trace; with share_numbers=True, programs that differ only in "
        "such numbers run one shared program after the first, so a family "
        "compiles twice, however many values it meets (a third time only "
        "where a value differs in a number its first two shared)."
        if shares_numbers
        else "a new trace and, as the value is part of the program, a new XLA compile."
    )
    head = (
        f"{location(fn)} was traced again {retraces} times by af.filter_jit because "
        "Python numbers among its arguments took new values: a number is not an "
        f"array, so each new value is a new cache key, {cost}"
    )
    if changes:
        lines = summary(changes)
        lines[0] = f"{head} Compared with the call before, {lines[0]}"
    else:
        lines = [
            f"{head} This call's arguments have another structure than earlier "
            "ones (a field that became None, a list that grew, ...)."
        ]
    lines.append(
        "af.explain_retraces() explains every retrace as it happens; "
        "ARRAYFIELD_RETRACE_LIMIT=0 turns this warning off."
    )
    warn_in_user_code(RetraceWarning("\n".join(lines)))
