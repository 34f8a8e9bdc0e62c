"""Running Python, a script or the `arrayfield` command in a fresh process, and
importing a script (a benchmark) that is not a package module.

Tests use a subprocess where the rule is about a whole process: what importing
arrayfield loads, environment switches read at import, warnings at interpreter
exit, the command line's exit codes. Every such run goes through `python()`, so all
of them see the same interpreter (this checkout's arrayfield), JAX on the CPU and
text output.
"""

import contextlib
import importlib.util
import os
import subprocess
import sys
import types
from collections.abc import Iterator, Mapping
from pathlib import Path

# The environment every subprocess starts from; JAX must not probe for GPUs.
ENV = {**os.environ, "JAX_PLATFORMS": "cpu"}


def python(
    *args: str | Path,
    cwd: str | Path | None = None,
    env: Mapping[str, str | None] | None = None,
    timeout: float = 300,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`python ARGS` with stdout and stderr captured as text.

    `env` is applied on top of `ENV`; a variable mapped to `None` is removed, so a
    test can run with a switch such as `ARRAYFIELD_CHECK` unset whatever the
    caller's shell says. With `check=True` a non-zero exit raises
    `subprocess.CalledProcessError`.
    """
    environment = dict(ENV)
    for name, value in (env or {}).items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    return subprocess.run(
        [sys.executable, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment,
        timeout=timeout,
        check=check,
    )


def run_code(code: str, **options: object) -> subprocess.CompletedProcess[str]:
    """`python -c CODE`; `options` as for `python()`."""
    return python("-c", code, **options)  # type: ignore[arg-type]


def run_cli(*args: str | Path, **options: object) -> subprocess.CompletedProcess[str]:
    """`python -m arrayfield ARGS`: the command line as users run it."""
    return python("-m", "arrayfield", *args, **options)  # type: ignore[arg-type]


@contextlib.contextmanager
def script_module(path: Path, name: str) -> Iterator[types.ModuleType]:
    """Import the script at `path` as module `name` for the `with` block.

    It is registered in `sys.modules` while the block runs (classes defined in it
    resolve their annotations there) and removed afterwards.
    """
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[name]


COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


@contextlib.contextmanager
def compiles_of(name: str) -> Iterator[list[str]]:
    """The XLA compiles of programs named `name` (JAX's backend-compile events
    for `jit(name)`) while the block runs."""
    import jax

    seen: list[str] = []

    def listener(event: str, duration: float, **kwargs: object) -> None:
        if event == COMPILE_EVENT and f"({name})" in str(kwargs.get("fun_name")):
            seen.append(str(kwargs.get("fun_name")))

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def assert_bitwise(a: object, b: object) -> None:
    """Two pytrees alike: one structure; arrays of one dtype, weak type and shape
    with equal bytes; other leaves of one type and `==`."""
    import jax
    import numpy as np

    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    leaves_a, leaves_b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    for x, y in zip(leaves_a, leaves_b, strict=True):
        if isinstance(x, jax.Array):
            assert isinstance(y, jax.Array)
            assert (x.dtype, x.weak_type, x.shape) == (y.dtype, y.weak_type, y.shape)
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        else:
            assert type(x) is type(y) and x == y
