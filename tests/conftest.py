import os
import sys

# Silence GPU/TPU probing; must happen before JAX is imported anywhere.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# Property tests: the same examples on every run and machine, so CI is reproducible.
# HYPOTHESIS_PROFILE=explore draws fresh random examples locally.
import jax
import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _decorated_functions_compared_within_one_test():
    """`af.explain_retraces` compares every decorated function with the earlier
    ones of the same code, for the whole process: within one test here, so that
    a test's lambda is not told it compiled again because another test's did."""
    yield
    record = sys.modules.get("arrayfield.diagnostics._record")
    if record is not None:
        record.DECORATED.by_code.clear()


@pytest.fixture(autouse=True)
def _no_persistent_cache_left_on():
    """A test that turns JAX's persistent compilation cache on in this process
    (an example of af.use_compile_cache run in process, say) makes every later
    test here read programs from disk: their compile counts then depend on
    what ran before, anywhere. Such a test runs in a subprocess."""
    yield
    left = jax.config.jax_compilation_cache_dir  # pyright: ignore[reportAttributeAccessIssue]
    assert left is None, f"this test left JAX's persistent cache on, at {left}"


@pytest.fixture(params=[False, True], ids=["constants", "simplified-constants"])
def jaxpr_constants(request):
    """Each test twice: with and without `jax_use_simplified_jaxpr_constants`
    (off by default up to JAX 0.10, on from 0.12.1), under which a captured
    array may be written into the equations that read it instead of being a
    constant of the program."""
    before = getattr(jax.config, "jax_use_simplified_jaxpr_constants", None)
    if before is None:  # older JAX: captured arrays are always constants
        if request.param:
            pytest.skip("this JAX has no jax_use_simplified_jaxpr_constants")
        yield request.param
        return
    jax.config.update("jax_use_simplified_jaxpr_constants", request.param)
    jax.clear_caches()
    try:
        yield request.param
    finally:
        jax.config.update("jax_use_simplified_jaxpr_constants", before)
        jax.clear_caches()
