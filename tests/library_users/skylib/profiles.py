import equinox as eqx

__all__ = ["Profile"]


class Profile(eqx.Module):
    width: float
