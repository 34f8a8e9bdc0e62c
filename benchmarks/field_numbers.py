"""Fields whose sources sit at other origins: `af.filter_jit(share_numbers=True)`
against `eqx.filter_jit` and the default `af.filter_jit` (issues 28 and 35).

The fields come from `tests/boxed_fields` (sources in boxes added into a frame
at per-field Python-int origins, their centres taken relative to the box as
float literals, a clipped box every fourth field, an optax step). Four figures:

- XLA compiles and wall time for K fields under each jit, and each later
  field's wall time (its trace, any compile and its steps); results compared
  with `eqx.filter_jit`'s per field, bitwise and by the largest difference;
- the per-step cost of the generalised program against each field's own
  (specialised) one: both run under `af.filter_jit`, interleaved call by call
  in one process, one blocking step at a time (as a fit loop that reads its
  loss each step), then back to back without blocking (throughput); medians;
- on generated programs (random placements, origins and float scales, with
  their gradients): how many output leaves equal `eqx.filter_jit`'s bitwise
  when numbers are shared, and the largest difference.

Run by `benchmarks/run.py` (which publishes it), or alone:
`python benchmarks/field_numbers.py [--quick]`.
"""

from __future__ import annotations

import functools
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import arrayfield as af

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from boxed_fields import (  # pyright: ignore
    CLIPPED_EVERY,
    OPTIMIZER,
    build_scene,
    fit_fields,
    observed,
    step,
)

SHARED = "af.filter_jit(share_numbers=True)"
JITS = {
    "eqx.filter_jit": eqx.filter_jit,
    "af.filter_jit": af.filter_jit,
    SHARED: functools.partial(af.filter_jit, share_numbers=True),
}


# The largest difference from eqx.filter_jit's that docs/many_fields.md states
# for shared numbers (tests/test_numbers.py's RTOL), of the leaf's largest value.
BOUND = 1e-5
# The fields that start a family of programs under share_numbers=True: the first,
# and the first whose box is clipped (tests/boxed_fields: CLIPPED_EVERY); each
# compiles its own program. The family's second field compiles the program
# shared by the rest.
FAMILY_STARTS = (0, CLIPPED_EVERY - 1)
FAMILY_SECONDS = (1, 2 * CLIPPED_EVERY - 1)


def compiles_expected(fields: int) -> int:
    """XLA compiles of the step for `fields` fields under share_numbers=True:
    per family, its first field's own program and, from its second field on,
    the shared one."""
    clipped = fields // CLIPPED_EVERY
    return min(fields - clipped, 2) + min(clipped, 2)


def sizes(quick: bool) -> tuple[int, int, int, int]:
    """(fields, steps per field, timed rounds per field, generated programs)."""
    return (3, 5, 30, 4) if quick else (8, 30, 300, 40)


def _bitwise(a: Any, b: Any) -> bool:
    return all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def _largest_difference(a: Any, b: Any) -> float:
    """The largest difference between two trees' leaves, as a fraction of the
    leaf's largest value."""
    found = 0.0
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        scale = float(np.max(np.abs(x), initial=0.0)) or 1.0
        found = max(found, float(np.max(np.abs(x - y), initial=0.0)) / scale)
    return found


def fits(fields: int, steps: int) -> list[dict[str, Any]]:
    measured = []
    for name, jit in JITS.items():
        jax.clear_caches()  # every jit starts cold
        start = time.perf_counter()
        runs, traces, compiles = fit_fields(jit, fields, steps)
        measured.append(
            {
                "jit": name,
                "fields": fields,
                "steps": steps,
                "traces": traces,
                "compiles": compiles,
                "total_s": time.perf_counter() - start,
                "runs": runs,
            }
        )
    eqx_runs = measured[0]["runs"]
    for m in measured:
        runs = m.pop("runs")
        pairs = list(zip(eqx_runs, runs, strict=True))
        m["bitwise_fields"] = sum(
            a.losses == b.losses and _bitwise(a.scene, b.scene) for a, b in pairs
        )
        m["max_rel"] = max(
            _largest_difference((a.losses, a.scene), (b.losses, b.scene))
            for a, b in pairs
        )
        # A later field's whole cost: its first step (trace, and compile where
        # it compiled) and its other steps; against its steps alone (the median
        # step, times the steps).
        m["later_field_s"] = statistics.median(run.total_s for run in runs[1:])
        m["later_steps_s"] = statistics.median(run.step_s for run in runs[1:]) * steps
        # The fields that start a family under share_numbers=True (the first,
        # and the first with a clipped box): every jit compiles for them, so
        # side by side they give the price of compiling a family's program.
        starts = [runs[i].total_s for i in FAMILY_STARTS if i < len(runs)]
        seconds = [runs[i].total_s for i in FAMILY_SECONDS if i < len(runs)]
        m["family_start_s"] = statistics.median(starts)
        m["family_second_s"] = statistics.median(seconds) if seconds else math.nan
        m["joining_s"] = statistics.median(
            run.total_s
            for i, run in enumerate(runs)
            if i not in FAMILY_STARTS + FAMILY_SECONDS
        )
    return measured


def step_costs(fields: int, rounds: int) -> dict[str, float]:
    """Median step time (µs) of the generalised program and of each field's own,
    over the fields that share one (all but the first of each family).

    The shared wrapper meets each field first: a wrapper whose trace is a
    program compiled before (by any wrapper) runs that executable, so meeting
    the field first with the plain wrapper would time its own program twice.
    Each timed field's compiles are checked: none or one (the generalised
    program, at a family's second field) for the shared wrapper, one (its own)
    for the plain one."""
    jax.clear_caches()
    own = af.filter_jit(step)
    shared = af.filter_jit(step, share_numbers=True)
    states = []
    for field in range(fields):
        scene, data = build_scene(field), observed(field)
        opt_state = OPTIMIZER.init(eqx.filter(scene, eqx.is_inexact_array))
        counts = []
        for fn in (shared, own):  # trace and compile outside the timings
            with af.count_compiles() as count:
                jax.block_until_ready(fn(scene, opt_state, data))
            counts.append(count.compiles)
        if field not in FAMILY_STARTS:
            expected = [int(field in FAMILY_SECONDS), 1]
            if counts != expected:
                raise RuntimeError(
                    f"field {field}: compiles {counts} (shared, own), "
                    f"expected {expected}: the timings would not compare the "
                    "shared program with the field's own"
                )
            states.append((scene, opt_state, data))
    latency: dict[str, list[float]] = {"own": [], "shared": []}
    throughput: dict[str, list[float]] = {"own": [], "shared": []}
    for args in states:
        times: dict[str, list[float]] = {"own": [], "shared": []}
        for r in range(rounds):
            order = (("own", own), ("shared", shared))
            for name, fn in order if r % 2 else order[::-1]:
                begin = time.perf_counter()
                jax.block_until_ready(fn(*args))
                times[name].append(time.perf_counter() - begin)
        for name in times:
            latency[name].append(statistics.median(times[name]))
        for r in range(5):
            order = (("own", own), ("shared", shared))
            for name, fn in order if r % 2 else order[::-1]:
                begin = time.perf_counter()
                for _ in range(rounds // 5 or 1):
                    out = fn(*args)
                jax.block_until_ready(out)
                throughput[name].append(
                    (time.perf_counter() - begin) / (rounds // 5 or 1)
                )
    return {
        "own_us": statistics.median(latency["own"]) * 1e6,
        "shared_us": statistics.median(latency["shared"]) * 1e6,
        "own_back_to_back_us": statistics.median(throughput["own"]) * 1e6,
        "shared_back_to_back_us": statistics.median(throughput["shared"]) * 1e6,
    }


class _Placement(eqx.Module):
    scale: jax.Array
    decay: float = eqx.field(static=True)  # a float literal of the program
    y: int = eqx.field(static=True)
    x: int = eqx.field(static=True)
    h: int = eqx.field(static=True)
    w: int = eqx.field(static=True)


def _program(frame: jax.Array, placements: list[_Placement]) -> Any:
    def loss(frame, placements):
        out = frame
        for p in placements:
            ramp = jnp.arange(p.h * p.w, dtype=jnp.float32).reshape(p.h, p.w)
            box = p.scale * jnp.exp(-ramp / p.decay)
            out = out.at[:, p.y : p.y + p.h, p.x : p.x + p.w].add(box)
            out = out + jnp.sum(out[:, p.x : p.x + p.w, p.y : p.y + p.h]) * 1e-3
        return jnp.sum(jnp.sin(out) * jnp.arange(out.size).reshape(out.shape))

    return jax.value_and_grad(loss, argnums=(0, 1))(frame, placements)


def generated(programs: int) -> dict[str, Any]:
    """Over `programs` random programs of 4 fields each: output leaves, how many
    equal `eqx.filter_jit`'s bitwise with numbers shared and without, and the
    largest difference with numbers shared."""
    rng = np.random.default_rng(28)
    frame = jnp.asarray(rng.normal(size=(2, 40, 40)), jnp.float32)
    counts = {
        "leaves": 0,
        "shared_equal": 0,
        "default_equal": 0,
        "max_rel": 0.0,  # the gradients: elementwise, inside the bound
        "loss_max_rel": 0.0,  # the loss: a cancelling sum, outside it
    }
    for _ in range(programs):
        shapes = [
            (int(rng.integers(1, 16)), int(rng.integers(1, 16))) for _ in range(3)
        ]
        calls = [
            [
                _Placement(
                    jnp.asarray(rng.normal(size=(2, 1, 1)), jnp.float32),
                    float(rng.uniform(2.0, 12.0)),
                    int(rng.integers(0, 41 - max(h, w))),
                    int(rng.integers(0, 41 - max(h, w))),
                    h,
                    w,
                )
                for h, w in shapes
            ]
            for _ in range(4)
        ]
        outs = {}
        for name, jit in JITS.items():
            jax.clear_caches()
            fn = jit(_program)
            outs[name] = [jax.tree.leaves(fn(frame, c)) for c in calls]
        for e, a, s in zip(*outs.values(), strict=True):
            for i, (x, y, z) in enumerate(zip(e, a, s, strict=True)):
                x, y, z = np.asarray(x), np.asarray(y), np.asarray(z)
                counts["leaves"] += 1
                counts["default_equal"] += int(np.array_equal(x, y))
                counts["shared_equal"] += int(np.array_equal(x, z))
                scale = float(np.max(np.abs(x))) or 1.0
                # Leaf 0 is the loss, a sum of 3,200 terms of both signs: its
                # rounding depends on the order XLA sums in, far more than
                # its value (docs/many_fields.md: outside the bound).
                which = "loss_max_rel" if i == 0 else "max_rel"
                counts[which] = max(counts[which], float(np.max(np.abs(x - z))) / scale)
    counts["programs"] = programs
    return counts


def main(quick: bool) -> dict[str, Any]:
    fields, steps, rounds, programs = sizes(quick)
    return {
        "fits": fits(fields, steps),
        "steps": step_costs(fields, rounds),
        "generated": generated(programs),
    }


def rows(measured: dict[str, Any]) -> list[dict[str, str]]:
    """Summary rows: case, baseline, arrayfield, ratio, target, status ("FAIL"
    for a wrong trace or compile count, default results not bitwise eqx's, or
    shared ones outside the documented bound)."""
    by = {m["jit"]: m for m in measured["fits"]}
    e, d, s = by["eqx.filter_jit"], by["af.filter_jit"], by[SHARED]
    k, steps = e["fields"], e["steps"]
    families = 1 if k < CLIPPED_EVERY else 2  # a clipped box from the fourth on
    expected = compiles_expected(k)
    counts_ok = (
        e["traces"] == d["traces"] == s["traces"] == k
        and (e["compiles"], d["compiles"]) == (k, k)
        and e["bitwise_fields"] == d["bitwise_fields"] == k
        and s["max_rel"] <= BOUND
        and s["bitwise_fields"] >= families  # each family's first: its own program
    )
    c, g = measured["steps"], measured["generated"]
    ratio = c["shared_us"] / c["own_us"]
    back_to_back = c["shared_back_to_back_us"] / c["own_back_to_back_us"]
    return [
        {
            "case": f"boxed fields: compiles for {k} fields ({steps} steps each), "
            "share_numbers=True",
            "baseline": f"eqx.filter_jit {e['compiles']}, "
            f"af.filter_jit {d['compiles']}",
            "arrayfield": str(s["compiles"]),
            "ratio": "",
            "target": f"{expected}, at most two per shape set (issue 46); {k} "
            f"traces each; largest difference from eqx's {s['max_rel']:.1e} "
            f"(bound {BOUND:.0e})",
            "status": ("pass" if s["compiles"] == expected else "MISS")
            if counts_ok
            else "FAIL",
        },
        {
            "case": "boxed fields: a later field's wall time (s, median), "
            "share_numbers=True / its steps alone",
            "baseline": f"{s['later_steps_s']:.3f}",
            "arrayfield": f"{s['later_field_s']:.3f}",
            "ratio": f"{s['later_field_s'] / s['later_steps_s']:.2f}x",
            "target": f"report (eqx.filter_jit {e['later_field_s']:.3f} s)",
            "status": "info",
        },
        {
            "case": f"boxed fields: wall time (s), all {k} fields",
            "baseline": f"eqx.filter_jit {e['total_s']:.2f}, "
            f"af.filter_jit {d['total_s']:.2f}",
            "arrayfield": f"{s['total_s']:.2f}",
            "ratio": f"{s['total_s'] / e['total_s']:.2f}x eqx",
            "target": "report",
            "status": "info",
        },
        {
            "case": "boxed fields: one step, the shared program / the field's own "
            "(median µs, blocking each step)",
            "baseline": f"{c['own_us']:.0f}",
            "arrayfield": f"{c['shared_us']:.0f}",
            "ratio": f"{ratio:.2f}x",
            "target": "≤ 1.05x (issue 46)",
            "status": "pass" if ratio <= 1.05 else "MISS",
        },
        {
            "case": "boxed fields: one step, the shared program / the field's own "
            "(median µs, back to back)",
            "baseline": f"{c['own_back_to_back_us']:.0f}",
            "arrayfield": f"{c['shared_back_to_back_us']:.0f}",
            "ratio": f"{back_to_back:.2f}x",
            "target": "report",
            "status": "info",
        },
        {
            "case": f"generated programs ({g['programs']} x 4 fields, numbers "
            "shared): output leaves bitwise eqx.filter_jit's",
            "baseline": f"af.filter_jit {g['default_equal']}/{g['leaves']}",
            "arrayfield": f"{g['shared_equal']}/{g['leaves']}",
            "ratio": "",
            "target": f"report (largest difference {g['max_rel']:.1e} of the "
            "leaf's largest value in the gradients, bound "
            f"{BOUND:.0e}; {g['loss_max_rel']:.1e} in the loss, a cancelling sum)",
            "status": "info"
            if g["default_equal"] == g["leaves"] and g["max_rel"] <= BOUND
            else "FAIL",
        },
    ]


def table(measured: dict[str, Any]) -> tuple[list[str], list, str]:
    """The docs page's table: one column per jit, one row per figure."""
    fits = measured["fits"]
    k, steps = fits[0]["fields"], fits[0]["steps"]
    columns = ["", *(f"`{m['jit']}`" for m in fits)]
    lines = [
        (f"XLA compiles for {k} fields", lambda m: str(m["compiles"])),
        (f"traces for {k} fields", lambda m: str(m["traces"])),
        (f"wall time, all {k} fields (s)", lambda m: f"{m['total_s']:.2f}"),
        (
            "a later field, trace + compile + steps (s, median)",
            lambda m: f"{m['later_field_s']:.3f}",
        ),
        (
            "fields bitwise equal to `eqx.filter_jit`'s",
            lambda m: f"{m['bitwise_fields']}/{k}",
        ),
        (
            "largest difference from `eqx.filter_jit`'s",
            lambda m: f"{m['max_rel']:.1e}",
        ),
    ]
    rows = [[label, *(cell(m) for m in fits)] for label, cell in lines]
    c, g = measured["steps"], measured["generated"]
    caption = (
        f"{k} fields of `tests/boxed_fields`, {steps} optax steps each, one process; "
        "a difference is a fraction of the leaf's largest value. On "
        f"{g['programs']} generated programs of 4 fields each (random placements, "
        "origins and float scales, with their gradients), shared numbers gave "
        f"{g['shared_equal']}/{g['leaves']} output leaves bitwise equal to "
        f"`eqx.filter_jit`'s and a largest difference of {g['max_rel']:.1e} in "
        f"the gradients; in the loss, a sum of 3,200 terms of both signs (whose "
        "rounding depends on the order XLA sums in: cancellation, outside the "
        f"bound), {g['loss_max_rel']:.1e} of its value. "
        f"One step of a later field: {c['own_us']:.0f} µs on its own program, "
        f"{c['shared_us']:.0f} µs on the shared one when each step is waited for, "
        f"{c['own_back_to_back_us']:.0f} and {c['shared_back_to_back_us']:.0f} µs "
        "back to back (medians, interleaved)."
    )
    return columns, rows, caption


def costs(measured: dict[str, Any]) -> tuple[list[str], list, str]:
    """What `share_numbers=True` costs and saves, against `eqx.filter_jit` on
    the same fields: the table at the top of docs/many_fields.md."""
    by = {m["jit"]: m for m in measured["fits"]}
    e, s = by["eqx.filter_jit"], by[SHARED]
    k, steps = e["fields"], e["steps"]
    c = measured["steps"]

    def row(what: str, key: str, digits: int) -> list[str]:
        return [
            what,
            f"{e[key]:.{digits}f} s",
            f"{s[key]:.{digits}f} s",
            f"{s[key] / e[key]:.2f}x",
        ]

    rows = [
        row("a family's first field: its own program, compiled", "family_start_s", 2),
        row(
            "its second field: the program shared by the rest, compiled",
            "family_second_s",
            2,
        ),
        row("a later field: trace and steps, no compile", "joining_s", 3),
        [
            "one step of a later field, waited for",
            f"{c['own_us']:.0f} µs",
            f"{c['shared_us']:.0f} µs",
            f"{c['shared_us'] / c['own_us']:.2f}x",
        ],
        [
            "fields bitwise equal to `eqx.filter_jit`'s",
            f"{k}/{k}",
            f"{s['bitwise_fields']}/{k}",
            f"largest difference {s['max_rel']:.1e} (bound {BOUND:.0e})",
        ],
    ]
    # Where the option stops paying: a family costs the option its first two
    # fields (the second compiles a slower program) and saves a compile on each
    # field after them; a later field pays the step ratio on every step.
    saved = e["joining_s"] - s["joining_s"]
    extra = (s["family_start_s"] - e["family_start_s"] + s["family_second_s"]) - e[
        "family_second_s"
    ]
    repaid = max(extra, 0.0) / max(saved, 1e-9)
    per_step = (c["shared_us"] - c["own_us"]) * 1e-6
    even = (
        f"about {saved / per_step:,.0f} steps per field"
        if per_step > 0
        else "no number of steps (the shared step was not slower here)"
    )
    caption = (
        f"{k} fields of `tests/boxed_fields`, {steps} optax steps each, against "
        "`eqx.filter_jit` on the same fields, one process; medians. A family's "
        "first field runs its own program, bitwise `eqx.filter_jit`'s; its "
        "second compiles the program that takes the numbers that differ as "
        f"inputs; the extra compile time is repaid after {repaid:.1f} later "
        "fields. The option gains nothing where most fields start a family of "
        "their own (a shape of their own: a box of another size), and loses on "
        f"fits long enough ({even}) that the slower step outweighs the compile "
        "saved."
    )
    columns = ["", "`eqx.filter_jit`", "`share_numbers=True`", "ratio"]
    return columns, rows, caption


if __name__ == "__main__":
    found = rows(main("--quick" in sys.argv[1:]))
    for row in found:
        print(" | ".join(row.values()))
