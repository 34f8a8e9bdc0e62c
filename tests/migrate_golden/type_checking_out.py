from typing import TYPE_CHECKING

import arrayfield as af
import jax

if TYPE_CHECKING:

    class Stub(af.ArrayModule):
        value: jax.Array

else:
    Stub = None


class Real(af.ArrayModule):
    value: jax.Array
