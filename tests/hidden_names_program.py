"""A program run by `test_hidden_names.py` with some of JAX's and equinox's
private modules hidden from arrayfield alone (JAX and equinox keep theirs).

`AF_HIDE` holds a JSON list of module names to hide ("*": every private module).
The program uses the fields, `af.filter_jit` beside `eqx.filter_jit`, and the
diagnostics, and prints one JSON object: what it computed, the private modules
arrayfield imported, and the warnings it gave.
"""

import builtins
import json
import os
import sys
import warnings

HIDDEN = set(json.loads(os.environ.get("AF_HIDE", "[]")))
imported: set[str] = set()
_real_import = builtins.__import__


def _private(name: str) -> bool:
    return name.startswith(("jax._src", "jaxlib", "equinox._"))


def _hidden_import(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__") or ""
    if level != 0 or not importer.startswith("arrayfield"):
        return _real_import(name, globals, locals, fromlist, level)
    wanted = [name, *(f"{name}.{item}" for item in fromlist or ())]
    for target in wanted:
        if _private(target) and ("*" in HIDDEN or target in HIDDEN):
            raise ImportError(f"{target} is hidden from arrayfield")
    module = _real_import(name, globals, locals, fromlist, level)
    submodules = [t for t in wanted[1:] if t in sys.modules]
    for target in submodules or [name]:  # `from pkg import sub` reads sub
        if _private(target):
            imported.add(target)
    return module


builtins.__import__ = _hidden_import

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jaxtyping import Array, Float, Int  # noqa: E402

import arrayfield as af  # noqa: E402

warnings.simplefilter("always")
result: dict = {}
with warnings.catch_warnings(record=True) as caught:

    class Source(af.ArrayModule):
        flux: Float[Array, ""]
        centre: Float[Array, "2"]
        index: Int[Array, ""]
        name: str = af.field(static=True, default="s")
        steps: int = 3

    s = Source(flux=2, centre=[1, 2.5], index=True, steps=4)
    result["fields"] = [
        [str(x.dtype), bool(x.weak_type), x.tolist()]
        for x in (s.flux, s.centre, s.index)
    ] + [s.name, s.steps, type(s.steps).__name__]
    try:
        Source(flux="bright", centre=[0, 0], index=0)
    except Exception as error:  # the field's own error, naming class and value
        result["bad input"] = [type(error).__name__, str(error).splitlines()[0]]
    nested = af.normalize({"a": Source(flux=1.5, centre=[0, 0], index=0)})
    result["normalize"] = str(nested["a"].flux.dtype)

    def make_step(counter):
        def step(src, rate, flag):
            counter.append(flag)
            return src.flux * rate + src.centre.sum(), flag

        return step

    runs = {}
    jits = {
        "af": af.filter_jit,
        "af numbers": af.filter_jit(share_numbers=True),
        "eqx": eqx.filter_jit,
    }
    for label, jit in jits.items():
        traces: list = []
        step = jit(make_step(traces))
        outs = [
            step(s, rate, flag)
            for rate, flag in ((0.5, "a"), (0.5, "a"), (1.5, "a"), (0.5, "b"))
        ]
        runs[label] = {
            "values": [[float(v), f] for v, f in outs],
            "traces": len(traces),
        }
    result["jit"] = runs

    @eqx.filter_jit
    def moving(x, offset):
        return x + offset

    with af.explain_retraces():
        for offset in (1, 2):
            moving(jnp.ones(2), offset)
    findings = af.audit(s, Source(flux=3, centre=[1, 2], index=0, steps=5))
    result["audit"] = sorted(str(f.path) for f in findings)

result["warnings"] = sorted(
    f"{w.category.__name__}: {str(w.message)[:60]}"
    for w in caught
    if w.category.__name__ == "CompatibilityWarning"
)
result["retrace warnings"] = sum(
    w.category.__name__ == "RetraceWarning" for w in caught
)
result["imported"] = sorted(imported)
print(json.dumps(result))
