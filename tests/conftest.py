import os

# Silence GPU/TPU probing; must happen before JAX is imported anywhere.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
