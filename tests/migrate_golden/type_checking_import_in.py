from typing import TYPE_CHECKING

import equinox as eqx
import jax

if TYPE_CHECKING:
    import arrayfield as af


class Camera(eqx.Module):
    focus: jax.Array


def build() -> "af.ArrayModule":
    return Camera(1.0)
