"""af.count_compiles: the XLA compiles a block of code caused, apart from the
programs it read from JAX's persistent compilation cache.

JAX reports both through one event, `/jax/core/compile/backend_compile_duration`
(it times the call that compiles or reads the cache); a read also sends
`/jax/compilation_cache/cache_hits` just before, on the same thread. Counting
the first event alone therefore counts a process that compiled nothing, because
every program came from the cache, as one that compiled everything.
"""

import collections
import contextlib
import dataclasses
import threading
from collections.abc import Iterator

from . import _internals

_COMPILE_EVENT = _internals.COMPILE_EVENT
_CACHE_HIT_EVENT = _internals.CACHE_HIT_EVENT


@dataclasses.dataclass(eq=False)  # blocks are told apart by identity
class CompileCount:
    """What `af.count_compiles` counted, by the name JAX compiles a program
    under (`"jit(step)"` for a function `step` under `af.filter_jit`,
    `eqx.filter_jit` or `jax.jit`). JAX versions that send their compile event
    without the program's name (0.4.38 does) count every program under
    `"<unnamed>"`; the totals are the same.

    **Attributes:**

    - `compiled`: programs XLA compiled, a `collections.Counter` by name.
    - `loaded`: programs read from JAX's persistent compilation cache instead.

    !!! example

        ```python
        import jax
        import jax.numpy as jnp

        import arrayfield as af


        def wave(x):
            return jnp.sin(x) + 1


        x = jnp.ones(3)
        with af.count_compiles() as count:
            jax.jit(wave)(x)
        assert count.compiles == 1 and count.cache_reads == 0
        # count.compiled == {"jit(wave)": 1}, where JAX names its programs
        ```
    """

    compiled: collections.Counter[str] = dataclasses.field(
        default_factory=collections.Counter
    )
    loaded: collections.Counter[str] = dataclasses.field(
        default_factory=collections.Counter
    )

    @property
    def compiles(self) -> int:
        """All programs compiled, whatever their name."""
        return sum(self.compiled.values())

    @property
    def cache_reads(self) -> int:
        """All programs read from the persistent cache."""
        return sum(self.loaded.values())


class _Listeners:
    """One pair of JAX listeners for the process (JAX cannot remove a listener),
    feeding every block that is counting."""

    def __init__(self) -> None:
        self.active: list[CompileCount] = []
        self.lock = threading.Lock()
        self.hit = threading.local()  # a cache read announced on this thread
        self.installed = False

    def install(self) -> None:
        import jax

        with self.lock:
            if self.installed:
                return
            self.installed = True
        jax.monitoring.register_event_listener(self.on_event)
        jax.monitoring.register_event_duration_secs_listener(self.on_duration)

    def on_event(self, event: str, **kwargs: str | int) -> None:
        if event == _CACHE_HIT_EVENT:
            self.hit.pending = True

    def on_duration(
        self, event: str, duration_secs: float, **kwargs: str | int
    ) -> None:
        if event != _COMPILE_EVENT:
            return
        name = str(kwargs.get("fun_name", "<unnamed>"))
        read = getattr(self.hit, "pending", False)
        self.hit.pending = False
        with self.lock:
            for count in self.active:
                (count.loaded if read else count.compiled)[name] += 1


_LISTENERS = _Listeners()


@contextlib.contextmanager
def count_compiles() -> Iterator[CompileCount]:
    """Count the XLA compiles made while the block runs, in every thread of this
    process, apart from the programs read from JAX's persistent compilation cache.

    A trace that finds its program in JAX's in-memory cache compiles nothing and
    is not counted; a program read from the persistent cache
    (`jax_compilation_cache_dir`) is counted in `loaded`, not in `compiled`.
    Blocks may nest and overlap: each counts everything in its own span.

    **Returns:** a [`CompileCount`][arrayfield.CompileCount], filled in as the
    block runs.

    !!! example

        ```python
        import jax.numpy as jnp

        import arrayfield as af


        @af.filter_jit
        def double(x):
            return 2 * x


        x, y = jnp.ones(3), jnp.zeros(3)
        with af.count_compiles() as count:
            double(x)
            double(y)  # the same shape and dtype: no new compile
        assert count.compiles == 1  # count.compiled["jit(double)"] on newer JAX
        ```
    """
    _LISTENERS.install()
    count = CompileCount()
    with _LISTENERS.lock:
        _LISTENERS.active.append(count)
    try:
        yield count
    finally:
        with _LISTENERS.lock:
            _LISTENERS.active.remove(count)
