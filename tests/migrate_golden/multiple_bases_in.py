from typing import Generic, TypeVar

import equinox as eqx
import jax

T = TypeVar("T")


class Named:
    name = "component"


class Container(Generic[T], eqx.Module, strict=True):
    value: jax.Array


class Component(Named, eqx.Module):
    weight: jax.Array


class Both(Component, eqx.Module):
    extra: jax.Array
