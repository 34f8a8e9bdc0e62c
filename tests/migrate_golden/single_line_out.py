import arrayfield as af
import jax


class Empty(af.ArrayModule): pass


class One(af.ArrayModule): x: jax.Array
