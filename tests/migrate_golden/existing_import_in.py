import arrayfield as arf
import equinox as eqx
import jax


class Already(arf.ArrayModule):
    value: jax.Array


class NotYet(eqx.Module):
    value: jax.Array
