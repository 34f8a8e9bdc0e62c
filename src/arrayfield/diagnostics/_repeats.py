"""Retraces that repeat the causes of a function's last full warning: counted,
and told in one line at its next other warning or at the interpreter's exit,
so a loop that retraces a thousand times warns once and says how often."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from .._errors import RetraceNote, RetraceWarning, warn_in_user_code


@dataclasses.dataclass(eq=False)
class Repeats:
    """Retraces of one function that had the causes of its last full warning:
    counted, and told in one line at its next other warning or at exit."""

    where: str  # `qualname (file:line)` of the function
    causes: tuple  # as `_diff.causes` gives them, with `compiled` and `numbers`
    what: str  # the causes, in words, for the one line
    compiled: bool
    numbers: str | None
    category: type[UserWarning] = RetraceWarning  # the full warning's, and the line's
    count: int = 0

    def line(self) -> str:
        times = "time" if self.count == 1 else "times"
        done = "traced and compiled again" if self.compiled else "traced again"
        then = {
            "shared": "numbers differ: shared",
            "new family": "a new family of programs",
            "could share": "numbers differ: share_numbers=True would share them",
        }.get(self.numbers or "", "the same fix applies")
        return (
            f"{self.where} was {done} {self.count} more {times} for the causes "
            f"of its warning above ({self.what}): {then}."
        )


# Counts not yet told, by id of their record: told at exit if nothing else did.
_untold: dict[int, Repeats] = {}
_untold_lock = threading.Lock()


def tell(repeats: Repeats | None) -> None:
    """Warn with the one line for `repeats`, if it counted any."""
    if repeats is None:
        return
    with _untold_lock:
        if _untold.pop(id(repeats), None) is None:
            return  # told already (or nothing counted)
    warn_in_user_code(repeats.category(repeats.line()))


def counted(
    holder: Any, lock: threading.Lock, causes: tuple, new: Callable[[], Repeats]
) -> bool:
    """Count a retrace with the causes of `holder`'s last full warning, to be
    told in one line; where its causes are others, `new()` (this retrace's,
    whose warning follows; made only then: a repeat pays for no words) takes
    that place, and the count before it is told first."""
    with lock:
        repeats = holder.repeats
        if repeats is not None and repeats.causes == causes:
            repeats.count += 1
            with _untold_lock:
                _untold[id(repeats)] = repeats
            return True
        holder.repeats = new()
    tell(repeats)
    return False


def tell_all_repeats() -> None:
    """Tell every count not yet told (at exit; tests call it sooner)."""
    for repeats in list(_untold.values()):
        tell(repeats)


@atexit.register
def _tell_at_exit() -> None:
    # Under `-W error::arrayfield.RetraceWarning` the first warning raised
    # already; a traceback from the interpreter's exit would add nothing.
    with contextlib.suppress(RetraceWarning, RetraceNote):
        tell_all_repeats()
