from typing import TYPE_CHECKING

import arrayfield as af
import jax

if TYPE_CHECKING:
    import arrayfield as af


class Camera(af.ArrayModule):
    focus: jax.Array


def build() -> "af.ArrayModule":
    return Camera(1.0)
