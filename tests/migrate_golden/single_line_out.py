import arrayfield as af
import jax


class Empty(af.ArrayModule): pass


class One(af.ArrayModule): x: af.Field[jax.Array]
