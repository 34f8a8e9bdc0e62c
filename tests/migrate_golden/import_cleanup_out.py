import arrayfield as af
import os
import jax


class A(af.ArrayModule):
    x: af.Field[jax.Array]


class B(af.ArrayModule):
    y: jax.Array


print(os.sep)
