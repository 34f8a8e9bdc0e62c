import arrayfield as af
import os
import jax


class A(af.ArrayModule):
    x: jax.Array


class B(af.ArrayModule):
    y: jax.Array


print(os.sep)
