"""An array field without `af.Field`: the checkers expect an array (docs/typing.md's
table, first column)."""

import numpy as np
from jaxtyping import Array, Float

import arrayfield as af


class Bare(af.ArrayModule):
    x: Float[Array, ""]


class BareInit(af.ArrayModule):
    x: Float[Array, ""]

    def __init__(self) -> None:
        self.x = 0.5  # expect: pyright=reportAttributeAccessIssue mypy=assignment


Bare(x=0)  # expect: pyright=reportArgumentType mypy=arg-type
Bare(x=[0.0, 1.0])  # expect: pyright=reportArgumentType mypy=arg-type
Bare(x=np.zeros(()))  # expect: pyright=reportArgumentType mypy=arg-type
BareInit()
