"""The package's base class: every model class derives from it."""

import equinox as eqx


class Module(eqx.Module):
    """Base of every skyfit model class."""

    def describe(self) -> str:
        return type(self).__name__
