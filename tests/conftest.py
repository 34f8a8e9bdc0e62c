import os

# Silence GPU/TPU probing; must happen before JAX is imported anywhere.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

# Property tests: the same examples on every run and machine, so CI is reproducible.
# HYPOTHESIS_PROFILE=explore draws fresh random examples locally.
from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
