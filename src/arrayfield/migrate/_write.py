"""Writing a migrated file so that an interrupt never leaves half of it.

The new contents go to a temporary file beside the original, which is then
renamed over it: a reader, or a run killed at any moment (Ctrl-C, a CI job
cancelled), sees the old file or the new one, never a truncated one.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path


def write_atomically(path: Path, data: bytes) -> None:
    """Replace the contents of `path` (the file a link points to, for a link)
    with `data`, keeping its permission bits. Raises `OSError`."""
    import tempfile  # here: with random and shutil, 5 ms that --check never needs

    target = Path(os.path.realpath(path))
    mode = stat.S_IMODE(target.stat().st_mode)
    # Hidden, so that a file left by a killed run is skipped by the next walk.
    descriptor, temporary = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
    )
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
