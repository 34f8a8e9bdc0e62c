"""Diagnostics: why a jitted function traces again, and what in a tree would make it.

Reads trees and calls, never changes them. `explain_retraces` (`_retrace.py`,
with the per-function record in `_record.py`) compares the signatures of calls that
traced (`_signature.py`, `_diff.py`); `audit` (`_audit.py`) reads one tree before any
jit. Both name leaves as `_paths.py` writes them and give the fixes of `_hints.py`.
Only `arrayfield/__init__.py` points here, when a name is first used.
"""
