"""af.use_compile_cache: a second process compiles nothing (issue 51, item 4).

Each case runs fresh interpreters, as a job array would: the first compiles and
writes, the second reads. The step compiles in far under JAX's one-second
threshold, so without the call's zero threshold nothing would be written.
"""

from __future__ import annotations

import json
import textwrap

import jax
import pytest

import arrayfield as af
from arrayfield import _compile_cache, _jax_private, _kept_families
from helpers import run_code

JOB = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp
    from jaxtyping import Array, Float
    import equinox as eqx
    import arrayfield as af

    {setup}

    class Source(af.ArrayModule):
        flux: Float[Array, ""]
        origin: int = eqx.field(static=True)

    def render(source, image):
        return source.flux * image[source.origin : source.origin + 3]

    step = af.filter_jit(render, share_numbers={share})
    image = jnp.arange(12.0)
    sources = [Source(flux=2.0, origin=o) for o in {origins}]  # arrays made here
    with af.count_compiles() as count:  # only the step's compiles
        out = [step(source, image).tolist() for source in sources]
    print(json.dumps({{
        "compiled": sum(count.compiled.values()),
        "loaded": sum(count.loaded.values()),
        "out": out,
        "min_time": jax.config.jax_persistent_cache_min_compile_time_secs,
        "max_size": jax.config.jax_compilation_cache_max_size,
    }}))
    """
)


def job(setup: str, origins=(1,), share=False, env=None) -> dict:
    code = JOB.format(setup=setup, share=share, origins=list(origins))
    done = run_code(code, env=env or {}, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_compiles_nothing(tmp_path):
    setup = f"af.use_compile_cache({str(tmp_path)!r})"
    first, second = job(setup), job(setup)
    assert (first["compiled"], first["loaded"]) == (1, 0)
    assert (second["compiled"], second["loaded"]) == (0, 1)
    assert first["out"] == second["out"]
    assert first["min_time"] == 0.0
    assert first["max_size"] == _compile_cache.DEFAULT_MAX_SIZE
    assert any(tmp_path.iterdir())


def test_a_call_after_the_first_compile_keeps_what_compiles_after_it(tmp_path):
    setup = (
        "jax.jit(lambda x: x + 1)(1.0)  # JAX compiled before the call\n"
        f"af.use_compile_cache({str(tmp_path)!r})"
    )
    first, second = job(setup), job(setup)
    assert (first["compiled"], second["compiled"], second["loaded"]) == (1, 0, 1)


def test_without_it_jaxs_threshold_keeps_nothing_this_fast(tmp_path):
    # What the call changes: JAX's own cache, given only a directory, skips a
    # program that compiled in under a second.
    setup = f"jax.config.update('jax_compilation_cache_dir', {str(tmp_path)!r})"
    first, second = job(setup), job(setup)
    assert (first["compiled"], second["compiled"]) == (1, 1)
    assert second["loaded"] == 0


sharing = pytest.mark.skipif(
    _jax_private.sharing_problem() is not None,
    reason="sharing numbers needs a JAX whose traced jits show their program",
)


@sharing
def test_a_family_of_numbers_is_read_back_in_a_second_process(tmp_path):
    # share_numbers: the first origin's own program and the shared one are
    # written by the first process, with the numbers the shared one lifts
    # (`_kept_families`); a second one shares from its first field, the old
    # origin included, and reads the shared program.
    setup = f"af.use_compile_cache({str(tmp_path)!r})"
    first = job(setup, origins=(1, 2, 3), share=True)
    second = job(setup, origins=(1, 4, 5, 6), share=True)
    assert (first["compiled"], first["loaded"]) == (2, 0)
    assert (second["compiled"], second["loaded"]) == (0, 1)
    assert second["out"][0] == first["out"][0]


@sharing
def test_a_later_process_whose_fields_all_have_new_numbers_compiles_nothing(
    tmp_path,
):
    setup = f"af.use_compile_cache({str(tmp_path)!r})"
    job(setup, origins=(1, 2), share=True)
    later = job(setup, origins=(7, 3, 5), share=True)
    assert (later["compiled"], later["loaded"]) == (0, 1)
    alone = job("", origins=(7, 3, 5))  # each field's own program, no cache
    assert later["out"] == alone["out"]


@sharing
@pytest.mark.parametrize("kept", ["removed", "unreadable", "another family's"])
def test_without_the_kept_numbers_a_family_starts_with_its_own_program(tmp_path, kept):
    # What the files decide, and that a bad one costs a compile, never a value:
    # the family's first field compiles its own program, as in a new cache.
    setup = f"af.use_compile_cache({str(tmp_path)!r})"
    job(setup, origins=(1, 2), share=True)
    (record,) = (tmp_path / _kept_families.FOLDER).iterdir()
    if kept == "removed":
        record.unlink()
    elif kept == "unreadable":
        record.write_text("{not json")
    else:  # numbers this program does not have
        record.write_text(json.dumps({"lifted": [5]}))
    later = job(setup, origins=(7, 3), share=True)
    assert (later["compiled"], later["loaded"]) == (1, 1)
    assert later["out"] == job("", origins=(7, 3))["out"]


def test_without_filelock_the_cache_works_unbounded(tmp_path):
    # JAX evicts under filelock's lock; a bound set without it breaks every
    # read and write (JAX warns and compiles), so none is set.
    setup = (
        "sys.modules['filelock'] = None  # not installed\n"
        f"af.use_compile_cache({str(tmp_path)!r})"
    )
    first, second = job(setup), job(setup)
    assert first["max_size"] == -1
    assert (second["compiled"], second["loaded"]) == (0, 1)
    bounded = setup.replace(")", ", max_size=10**9)")
    done = run_code(JOB.format(setup=bounded, share=False, origins=[1]))
    assert done.returncode != 0
    assert "max_size=1000000000): JAX bounds its cache" in done.stderr
    assert "filelock" in done.stderr


def test_a_threshold_or_size_the_user_chose_stays(tmp_path):
    setup = (
        "jax.config.update('jax_persistent_cache_min_compile_time_secs', 5.0)\n"
        f"af.use_compile_cache({str(tmp_path)!r}, max_size=1000)"
    )
    done = job(setup, env={"JAX_COMPILATION_CACHE_MAX_SIZE": "123"})
    assert (done["min_time"], done["max_size"]) == (5.0, 123)


def test_turned_off():
    before = jax.config.jax_enable_compilation_cache  # pyright: ignore
    try:
        assert af.use_compile_cache(enabled=False) is None
        assert jax.config.jax_enable_compilation_cache is False  # pyright: ignore
    finally:
        jax.config.update("jax_enable_compilation_cache", before)


def test_the_default_directory_is_per_user(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    want = tmp_path / "arrayfield" / "jax-compilation-cache"
    assert _compile_cache.default_cache_dir() == want


@pytest.mark.parametrize("size", [-2, 1.5, True, "1G"])
def test_a_size_that_is_no_number_of_bytes_is_an_error(size):
    with pytest.raises(ValueError, match=rf"max_size={size!r}"):
        af.use_compile_cache(max_size=size)
