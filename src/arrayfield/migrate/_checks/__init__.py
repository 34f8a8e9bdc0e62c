"""One module per diagnostic code: its message and its check.

A check reads a `FieldSite` (or, for AF006, a call) and returns a `Diagnostic`
or None; it changes nothing. `_analysis` decides which checks a field gets and
plans the edits. A new code is a new module here, called from `_analysis`, with
its one-line summary in `_diagnostics.CODES` (read by `--help` without libcst).
"""
