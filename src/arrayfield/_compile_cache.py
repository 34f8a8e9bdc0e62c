"""af.use_compile_cache: JAX's persistent compilation cache, set as a survey
needs it, in one call and only when asked.

JAX keeps compiled programs on disk across processes once it is given a
directory, but by default it writes only programs that took a second or more to
compile. A fit step compiles in about that time, so whether it is kept depends
on the machine's load: two identical runs of a thousand short jobs may compile
in every job or in the first only. Here the threshold is zero unless the user
chose one, the directory is a per-user one unless given, and the cache's size is
bounded. Only public configuration options are set (`jax.config.update`).

Not done at import: a library that writes to the user's disk because it was
imported would surprise whoever runs it on a home directory with a quota, in a
read-only container, or in tests that must not share state; JAX itself leaves
the cache off. One call in the job's entry point (or in a Dask worker plugin)
is the explicit choice.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import jax

# JAX's defaults for the two options a user may have set before this call: a
# value other than these (or the environment variable JAX reads) is theirs.
_JAX_MIN_COMPILE_TIME = 1.0
_JAX_MAX_SIZE = -1
_JAX_MIN_ENTRY_SIZE = 0
_MIN_TIME_OPTION = "jax_persistent_cache_min_compile_time_secs"
_MIN_SIZE_OPTION = "jax_persistent_cache_min_entry_size_bytes"
_MAX_SIZE_OPTION = "jax_compilation_cache_max_size"
DEFAULT_MAX_SIZE = 2 * 1024**3  # bytes: the oldest entries go past this


def can_bound() -> bool:
    """Whether JAX can bound the cache's size here: it evicts under a file lock
    from the `filelock` package, which JAX does not depend on (without it, a
    bound set makes every cache read and write fail)."""
    try:
        import filelock  # noqa: F401  # pyright: ignore[reportMissingImports]
    except ImportError:
        return False
    return True


def default_cache_dir() -> Path:
    """The per-user directory `af.use_compile_cache()` uses: under
    `$XDG_CACHE_HOME` (else `~/.cache`), or `%LOCALAPPDATA%` on Windows."""
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        root = Path(os.environ["LOCALAPPDATA"])
    else:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "arrayfield" / "jax-compilation-cache"


def use_compile_cache(
    path: str | os.PathLike[str] | None = None,
    *,
    max_size: int | None = None,
    enabled: bool = True,
) -> Path | None:
    """Keep compiled programs on disk, so that a second process compiles nothing.

    Points JAX's persistent compilation cache at `path` (created if missing),
    keeps every program however fast it compiled and however small (JAX's
    default keeps only those that took a second or more, so whether a fit step
    is kept depends on the machine's load), and bounds the directory's size. A
    threshold or a size the user set before (`jax.config.update` or JAX's
    environment variables) is left as it is. Call it once, early in the job (in
    each worker process, for a cluster); programs compiled before the call are
    not written.

    What it saves: XLA compiles. Every process still traces each step once per
    cache key, as `eqx.filter_jit` does; `af.count_compiles()` reports the
    programs read from the cache (`.loaded`) apart from those compiled. An entry
    serves only the same program on the same JAX and jaxlib versions and the
    same kind of device. With `af.filter_jit(..., share_numbers=True)`, which
    numbers a family's shared program takes is kept beside JAX's entries (a
    small file per family, in `arrayfield-families/`): a later process runs
    the family's fields, the first included, on that program, read from the
    cache, so fields with new numbers compile nothing.

    Not done on import: arrayfield writes nothing to disk unless asked.

    **Arguments:**

    - `path`: the cache directory; by default a per-user one
        (`$XDG_CACHE_HOME/arrayfield/jax-compilation-cache`, else under
        `~/.cache`).
    - `max_size`: the most bytes the directory may hold before JAX removes the
        least recently used entries; -1 for no bound. By default 2 GiB where the
        `filelock` package is installed (`pip install 'arrayfield[cache]'`),
        which JAX needs to evict, and no bound where it is not; a bound asked
        for without it is an error.
    - `enabled`: `False` turns JAX's persistent cache off for this process.

    **Returns:** the directory in use, or `None` when turned off.

    !!! example

        <!-- docs-test: subprocess -->
        ```python
        import tempfile

        import arrayfield as af

        # Early in the job; with no path, a per-user directory.
        cache = af.use_compile_cache(tempfile.mkdtemp())
        assert cache.is_dir()
        ```
    """
    if not enabled:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    if max_size is None:
        max_size = DEFAULT_MAX_SIZE if can_bound() else -1
    elif isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < -1:
        raise ValueError(
            f"af.use_compile_cache(max_size={max_size!r}): give a number of bytes, "
            "or -1 for no bound"
        )
    elif max_size != -1 and not can_bound():
        raise RuntimeError(
            f"af.use_compile_cache(max_size={max_size}): JAX bounds its cache "
            "under a lock from the `filelock` package, which is not installed "
            "(pip install filelock, or 'arrayfield[cache]'); without it every "
            "cache read and write would fail. Pass max_size=-1 for no bound."
        )
    directory = Path(path if path is not None else default_cache_dir()).expanduser()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OSError(
            f"af.use_compile_cache: cannot create the cache directory {directory}: "
            f"{error}"
        ) from error
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(directory))
    if _unset(_MIN_TIME_OPTION, _JAX_MIN_COMPILE_TIME):
        jax.config.update(_MIN_TIME_OPTION, 0.0)
    if _unset(_MIN_SIZE_OPTION, _JAX_MIN_ENTRY_SIZE):
        jax.config.update(_MIN_SIZE_OPTION, -1)  # small programs too, on any disk
    if _unset(_MAX_SIZE_OPTION, _JAX_MAX_SIZE):
        jax.config.update(_MAX_SIZE_OPTION, max_size)
    _reopen()
    return directory


def _reopen() -> None:
    """Have JAX read the options again at its next compile. JAX 0.4 opens its
    cache at the first compile of the process and keeps it as it was then
    (no directory: nothing written); `reset_cache`, public under
    `jax.experimental`, makes a call after that first compile count. Where it
    is missing, a late call keeps only what later versions keep anyway."""
    try:
        from jax.experimental.compilation_cache import compilation_cache
    except ImportError:
        return
    reset = getattr(compilation_cache, "reset_cache", None)
    if reset is not None:
        reset()


def _unset(option: str, default: object) -> bool:
    """Whether the user left a JAX option at its default: neither its
    environment variable nor a `jax.config.update` chose a value."""
    if option.upper() in os.environ:
        return False
    return getattr(jax.config, option) == default
