"""skylib: a library in the style of many, built on equinox (a fixture of
tests/test_library_users.py; it is placed among installed packages there).

Its classes are re-exported from submodules: with `*`, and one at run time."""

from . import profiles as _profiles
from .models import *  # noqa: F403

globals().update({name: getattr(_profiles, name) for name in _profiles.__all__})
