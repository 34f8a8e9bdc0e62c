"""The edits `arrayfield migrate`'s report on `skyfit` asks for, made by hand.

Each entry is (file, text before, text after); tests/test_migrate_project.py
applies them after `arrayfield migrate --fix` and docs/migration.md shows them.
"""

EDITS = [
    # AF001: fields that get new values per scene become scalar arrays.
    (
        "morphology.py",
        "import jax.numpy as jnp\n",
        "import jax.numpy as jnp\nfrom jaxtyping import Array, Float\n",
    ),
    ("morphology.py", "    n: float\n", '    n: Float[Array, ""]\n'),
    ("morphology.py", "    size: float\n", '    size: Float[Array, ""]\n'),
    (
        "renderer.py",
        "import jax.numpy as jnp\n",
        "import jax.numpy as jnp\nfrom jaxtyping import Array, Float\n",
    ),
    ("renderer.py", "    background: float\n", '    background: Float[Array, ""]\n'),
    # AF005, lambda: one module-level function instead of a lambda per instance.
    (
        "renderer.py",
        "Base = af.ArrayModule\n",
        "Base = af.ArrayModule\n\n\ndef _clip_negative(image):\n"
        "    return jnp.clip(image, 0.0)\n",
    ),
    (
        "renderer.py",
        "        self.transform = lambda image: jnp.clip(image, 0.0)\n",
        "        self.transform = _clip_negative\n",
    ),
    (
        "source.py",
        "import jax.numpy as jnp\n",
        "import jax\nimport jax.numpy as jnp\nfrom jaxtyping import Array, Float\n",
    ),
    ("source.py", "    flux: float\n", '    flux: Float[Array, ""]\n'),
    # AF005, string: the per-source name stays out of the model.
    ("source.py", "    name: str\n", ""),
    ("source.py", "        self.name = name\n", ""),
    ("source.py", "def __init__(self, name, flux,", "def __init__(self, flux,"),
    ("scene.py", '        name=f"source_{index}",\n', ""),
    # AF005, partial: jax.tree_util.Partial compares by value.
    (
        "source.py",
        "functools.partial(_soften, epsilon=0.5)",
        "jax.tree_util.Partial(_soften, epsilon=0.5)",
    ),
    ("source.py", "import functools\n\n", ""),
    # AF005, object: the WCS becomes a Module of arrays.
    (
        "wcs.py",
        '"""\n\n\nclass WCS:\n'
        "    def __init__(self, pixel_scale, origin):\n"
        "        self.pixel_scale = pixel_scale\n"
        "        self.origin = origin\n",
        '"""\n\nfrom jaxtyping import Array, Float\n\nfrom .base import Module\n\n\n'
        "class WCS(Module):\n"
        '    pixel_scale: Float[Array, ""]\n'
        '    origin: Float[Array, "2"]\n',
    ),
    # AF006: one Parameters class per set of names, not one per call.
    (
        "params.py",
        "def make_parameters(values):\n"
        "    annotations = {name: jax.Array for name in values}\n"
        '    cls = type("Parameters", (af.ArrayModule,), {"__annotations__": '
        "annotations})\n"
        "    return cls(**values)\n",
        "@functools.cache\n"
        "def _parameters_class(names):\n"
        "    annotations = {name: jax.Array for name in names}\n"
        '    return type("Parameters", (af.ArrayModule,), {"__annotations__": '
        "annotations})\n\n\n"
        "def make_parameters(values):\n"
        "    return _parameters_class(tuple(values))(**values)\n",
    ),
    (
        "params.py",
        "import arrayfield as af\n",
        "import functools\n\nimport arrayfield as af\n",
    ),
]
