from typing import Generic, TypeVar

import arrayfield as af
import jax

T = TypeVar("T")


class Named:
    name = "component"


class Container(Generic[T], af.ArrayModule, strict=True):
    value: jax.Array


class Component(Named, af.ArrayModule):
    weight: jax.Array


class Both(Component, af.ArrayModule):
    extra: jax.Array
