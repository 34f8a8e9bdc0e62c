import arrayfield as arf
import jax


class Already(arf.ArrayModule):
    value: jax.Array


class NotYet(arf.ArrayModule):
    value: jax.Array
