"""The `arrayfield migrate` codemod: equinox Module classes to `af.ArrayModule`.

The command line lives in `_cli`, which walks the tree (`_walk`), builds one
index of every class with `ast` (`_index`), then rewrites and checks each file
with what the index knows (`_transform`, which needs the optional dependency
libcst: ``pip install 'arrayfield[migrate]'``). Nothing here imports JAX or
equinox, so the tool starts fast and can migrate code in an environment where
they are not installed.
"""

from ._diagnostics import CODES as CODES
from ._diagnostics import Diagnostic as Diagnostic

__all__ = ["CODES", "Diagnostic"]
