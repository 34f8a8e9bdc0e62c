"""Spellings that differ between the newest JAX and the oldest one we support."""

import jax


def enable_x64(enabled: bool = True):
    """`jax.enable_x64(enabled)`; JAX < 0.5 spells it in `jax.experimental`."""
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(enabled)
    from jax.experimental import disable_x64
    from jax.experimental import enable_x64 as experimental_enable_x64

    return experimental_enable_x64() if enabled else disable_x64()
