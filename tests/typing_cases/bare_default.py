"""A bare default on an `af.Field`: what both checkers say (quoted in docs/typing.md;
`af.Field[Float[Array, ""]]` reads the same, since to them it is `Array`)."""

from jaxtyping import Array, Float

import arrayfield as af


class Scene(af.ArrayModule):
    x: af.Field[Array] = 1.0  # expect: pyright=reportAssignmentType mypy=assignment


class Fixed(af.ArrayModule):
    x: af.Field[Float[Array, ""]] = af.field(default=1.0)


Fixed()
