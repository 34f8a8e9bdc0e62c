"""What the checkers infer: the dataclass __init__ and the attribute's type."""

from typing import TYPE_CHECKING

from jaxtyping import Array, Float

import arrayfield as af


class Scene(af.ArrayModule):
    x: af.Field[Float[Array, ""]]
    name: str = "scene"


scene = Scene(x=0)

if TYPE_CHECKING:
    reveal_type(scene.x)
    reveal_type(Scene)
    reveal_type(Scene.__init__)
