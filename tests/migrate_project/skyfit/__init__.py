"""A small astronomy package: scenes of sources fitted to an image with optax.

Written for arrayfield's tests as a migration fixture: every class derives from
the package's own `Module` in `base.py`, re-exported here.
"""

from .base import Module
from .scene import Scene, build_scene

__all__ = ["Module", "Scene", "build_scene"]
