"""Mistakes a checker must report, marked `# expect: <checker>=<rule> ...`.

`pyright=` and `mypy=` hold for both modes of that checker; `pyright-strict=` and
`mypy-strict=` only for the strict mode. The test asserts this exact set.
"""

import equinox as eqx
from jaxtyping import Array, Float

import arrayfield as af


class Scene(af.ArrayModule):
    x: af.Field[Float[Array, ""]]
    name: str = "scene"


class Plain(eqx.Module):  # for comparison: what a plain Module is checked for
    x: Float[Array, ""]


scene = Scene(x=0)
Scene(x="bright")  # expect: pyright=reportArgumentType mypy=arg-type
Scene(x=[["a"]])  # expect: pyright=reportArgumentType mypy=list-item
Scene(x=None)  # expect: pyright=reportArgumentType mypy=arg-type
Scene(x=object())  # expect: pyright=reportArgumentType mypy=arg-type
Scene()  # expect: pyright=reportCallIssue mypy=call-arg
Scene(x=0, y=1)  # expect: pyright=reportCallIssue mypy=call-arg
Scene(x=0, name=3)  # expect: pyright=reportArgumentType mypy=arg-type
Scene(0, "a", 1)  # expect: pyright=reportCallIssue mypy=call-arg
Plain()  # expect: pyright=reportCallIssue mypy=call-arg
Plain(x=0)  # expect: pyright=reportArgumentType mypy=arg-type

label: str = scene.x  # expect: pyright=reportAssignmentType mypy=assignment
scene.x.no_such_attribute  # expect: pyright=reportAttributeAccessIssue pyright-strict=reportUnknownMemberType mypy=attr-defined
scene.missing  # expect: pyright=reportAttributeAccessIssue pyright-strict=reportUnknownMemberType mypy=attr-defined


class BadDefault(af.ArrayModule):  # a default is written af.field(default=0)
    x: af.Field[Array] = 0  # expect: pyright=reportAssignmentType mypy=assignment
