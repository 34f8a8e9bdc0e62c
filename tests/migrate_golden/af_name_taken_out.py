import arrayfield
import jax

af = "autofocus"


class Camera(arrayfield.ArrayModule):
    focus: jax.Array
