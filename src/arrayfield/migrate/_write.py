"""Writing a migrated file so that an interrupt never leaves half of it, and
never over an edit made since the file was read: the new contents go to a
temporary file beside the original, renamed over it after the original is
read again and found unchanged.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

# A new file only (never one that exists), as mkstemp opens it.
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


class ChangedSinceRead(Exception):
    """The file is no longer what the run read: it is not written."""


def write_atomically(path: Path, data: bytes, *, expected: bytes) -> None:
    """Replace the contents of `path` (the file a link points to, for a link)
    with `data`, keeping its permission bits, if it still holds `expected`.

    Raises `ChangedSinceRead` when it does not, `PermissionError` for a
    read-only file (as `ruff --fix` refuses one, though the rename could
    replace it), and `OSError` when it cannot be written."""
    target = Path(os.path.realpath(path))
    mode = stat.S_IMODE(target.stat().st_mode)
    # `access` answers yes to root for any file: a file nobody may write
    # counts as read-only for root too.
    if not os.access(target, os.W_OK) or not mode & 0o222:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
    # Hidden, so that the next walk skips a file left by a killed run. Named
    # inside the `try`, so that an interrupt just after it is created (the
    # signal handler raises between any two bytecodes) still removes it.
    temporary = ""
    try:
        while True:
            temporary = str(target.parent / f".{target.name}.{os.urandom(4).hex()}.tmp")
            try:
                descriptor = os.open(temporary, _CREATE, 0o600)
                break
            except FileExistsError:
                continue
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.chmod(temporary, mode)
        # As late as possible: what is left is the moment before the rename.
        if target.read_bytes() != expected:
            raise ChangedSinceRead(str(path))
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)  # "" (not named yet) raises, suppressed
        raise
