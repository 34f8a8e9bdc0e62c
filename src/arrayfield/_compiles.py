"""af.count_compiles: the XLA compiles a block of code caused, apart from the
programs it read from JAX's persistent compilation cache.

JAX reports both through one event (`_tracing` tells them apart): counting that
event alone would count a process that compiled nothing, because every program
came from the cache, as one that compiled everything.
"""

import collections
import contextlib
import dataclasses
from collections.abc import Iterator

from . import _tracing


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
    count = CompileCount()

    def sink(name: str, read: bool) -> None:
        (count.loaded if read else count.compiled)[name] += 1

    _tracing.add_compile_sink(sink)
    try:
        yield count
    finally:
        _tracing.remove_compile_sink(sink)
