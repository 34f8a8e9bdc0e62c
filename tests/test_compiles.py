"""af.count_compiles: XLA compiles by program name, and programs read from JAX's
persistent compilation cache counted apart (JAX times both as one event)."""

import json
import threading

import jax
import jax.numpy as jnp
import pytest

import arrayfield as af
from helpers import run_code


def _jax_names_programs() -> bool:
    """Whether this JAX sends its compile event with the program's name (0.4.38
    does not: af.count_compiles then counts every program as "<unnamed>")."""

    def probe(x):
        return x - 7

    x = jnp.ones(1)
    with af.count_compiles() as count:
        jax.jit(probe)(x)
    return "jit(probe)" in count.compiled


NAMED = pytest.mark.skipif(
    not _jax_names_programs(), reason="this JAX sends no program names"
)


@pytest.fixture(scope="module")
def halved() -> af.CompileCount:
    # Once: a second `halve` would share the first one's program (af.filter_jit
    # keys equal functions alike) and compile nothing.
    @af.filter_jit
    def halve(x):
        return x / 2

    x, y, z = jnp.ones(3), jnp.zeros(3), jnp.ones(4)
    with af.count_compiles() as count:
        halve(x)
        halve(y)  # the same signature: JAX's in-memory cache, no compile
        halve(z)  # a new shape: a new program
    return count


def test_a_compile_is_counted_once_per_program(halved):
    assert halved.compiles == 2 and halved.cache_reads == 0


@NAMED
def test_a_compile_is_counted_under_its_jit_name(halved):
    assert halved.compiled == {"jit(halve)": 2}


def test_nested_blocks_each_count_their_own_span():
    def first(x):
        return x + 1

    def second(x):
        return x * 3

    x = jnp.ones(2)
    with af.count_compiles() as outer:
        jax.jit(first)(x)
        with af.count_compiles() as inner:
            jax.jit(second)(x)
    assert (outer.compiles, inner.compiles) == (2, 1)
    with af.count_compiles() as after:
        pass
    assert after.compiles == 0  # a finished block is no longer fed


def test_compiles_in_other_threads_are_counted():
    def cube(x):
        return x**3

    x = jnp.ones(5)
    with af.count_compiles() as count:
        worker = threading.Thread(target=lambda: jax.jit(cube)(x))
        worker.start()
        worker.join()
    assert count.compiles == 1


# Two fresh processes share one cache folder: the first compiles and writes the
# step, the second reads it. JAX sends its compile event for the read too.
CACHE_RUN = """
import json, sys
import jax, jax.numpy as jnp
import arrayfield as af
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)

@af.filter_jit
def step(x):
    return jnp.tanh(x) * 2

x = jnp.ones(8)
jax.block_until_ready(x)
with af.count_compiles() as count:
    step(x)
print(json.dumps([count.compiles, count.cache_reads]))
"""


def test_a_program_read_from_the_persistent_cache_is_loaded_not_compiled(tmp_path):
    counts = []
    for _ in range(2):
        result = run_code(CACHE_RUN.replace("sys.argv[1]", repr(str(tmp_path))))
        assert result.returncode == 0, result.stderr
        counts.append(json.loads(result.stdout.strip().splitlines()[-1]))
    assert counts == [[1, 0], [0, 1]]  # compiled once, then read from disk
