import equinox as eqx
import jax

af = "autofocus"


class Camera(eqx.Module):
    focus: jax.Array
