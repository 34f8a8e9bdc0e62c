"""The `arrayfield migrate` codemod: equinox Module classes to `af.ArrayModule`.

The command line (`_cli`) finds the files (`_walk`) and hands them to the
runner (`_runner`), which reads each one's facts with `ast` (`_facts`),
resolves them across the tree (`_index`), then rewrites and checks each file
with what the index knows: `_read` walks a file's `ast` tree and runs the
rules of `_checks` (one module per AF code) over it, and `_splice` writes the
planned edits into the file's text. Nothing here imports anything
but the standard library (no JAX, no equinox), so the tool starts fast and can
migrate code in an environment where they are not installed.
"""

from ._checks import CODES as CODES
from ._diagnostics import Diagnostic as Diagnostic

__all__ = ["CODES", "Diagnostic"]
