"""Which numbers a family's shared program takes, kept beside JAX's persistent
compilation cache so that a later process shares from a family's first field.

With `share_numbers`, a family's first field compiles its own program and the
second one a program generalised over the numbers that differed
(`_executables`). JAX's persistent cache keeps both, but a new process that
meets the family with new numbers cannot ask for the shared one: which numbers
it lifts was learnt from two traces. Here that is written down, one small file
per family named by a digest of the family's program with those numbers blanked,
in a folder of the cache directory, so a later process lifts the same numbers at
its first field and reads the shared program from JAX's cache.

A file only chooses which numbers become inputs; the program is still built
from this process's own trace and checked as any generalised program. A file
of another program (a digest that collides, a file edited by hand) or an
unreadable one therefore costs at most a compile, never a value. Kept only
where JAX's cache is on with a local directory; nothing is written otherwise.
JAX's size bound neither counts nor evicts these files (it reads only its own
entries), and each holds a few bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jax

FOLDER = "arrayfield-families"
# JAX's options, read by name (its `Config` declares none of them to a type
# checker).
_ENABLED = "jax_enable_compilation_cache"
_DIRECTORY = "jax_compilation_cache_dir"


def folder() -> Path | None:
    """Where the files go: a folder of JAX's cache directory, or None where
    JAX's persistent cache is off or not on a local disk."""
    if not getattr(jax.config, _ENABLED):
        return None
    directory = getattr(jax.config, _DIRECTORY)
    if not directory or "://" in str(directory):
        return None
    return Path(directory) / FOLDER


def name(blanked: Any, context: Iterable[Any]) -> str:
    """A family's file name: a digest of its program with the family's numbers
    blanked (`_numbers.blanked`, as printed: the same in every process) and of
    what else makes the compile (jit parameters, the call's tree, placement,
    JAX's version and device)."""
    digest = hashlib.blake2b(str(blanked).encode(), digest_size=20)
    devices = jax.devices()
    for part in (*context, jax.__version__, devices[0].platform, len(devices)):
        digest.update(b"\0" + repr(part).encode())
    return digest.hexdigest()


def lifted(where: Path, family: str) -> frozenset[int] | None:
    """The numbers an earlier process lifted for this family, or None."""
    try:
        numbers = json.loads((where / f"{family}.json").read_text())["lifted"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(numbers, list) or not all(
        type(i) is int and i >= 0 for i in numbers
    ):
        return None
    return frozenset(numbers)


def keep(where: Path, family: str, numbers: frozenset[int]) -> None:
    """Note that this family lifts `numbers` (with what an earlier process noted:
    a family only widens). Written whole or not at all (a file renamed into
    place), so a reader never sees half a file; a failure to write is silent,
    since it costs a later process a compile and nothing else."""
    numbers = numbers | (lifted(where, family) or frozenset())
    try:
        where.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=where, suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(handle, "w") as file:
            json.dump({"lifted": sorted(numbers)}, file)
        os.replace(temporary, where / f"{family}.json")
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
