"""Fit a survey: many fields of the sky, one scene each, on a Dask cluster.

Every field has the same structure (a few sources with a flux, a position and a
width) and its own data, so one `af.filter_jit` step serves them all. The fields
run as Dask tasks, one per field, on the worker processes of a cluster:

- every worker turns on JAX's persistent compilation cache at start (a Dask
  worker plugin), so a program compiled by one worker is read from disk by the
  others (on a real cluster, `--cache-dir` is a shared filesystem);
- the first field runs alone before the others fan out (the warm-up): its worker
  compiles the step and writes it to the cache, and every other worker finds it
  there, so the step compiles once in the whole cluster (workers that started
  their first field at the same moment would each compile it);
- each field counts the XLA compiles of its task (`af.count_compiles`), apart
  from the programs read from the cache, and reports them with its result;
- each field's result (fitted parameters, losses, timings, compiles) is written
  atomically to `--results/field-NNNNN.npz`: a field whose file exists is done,
  so running again over the same folder fits only what is missing, and a worker
  that dies mid-field loses nothing (Dask runs the field again elsewhere).

The last line printed is JSON: fields asked for, fields done, fields fitted in
this run, workers, and the fit step's compiles over the whole cluster.

Needs dask and distributed (the `survey` extra: pip install -e '.[survey]').

With `--threads T` the fields run instead on T threads of one worker inside
this process (Dask's threaded workers, as `dask.delayed` and `dask.array` use
by default): the threads call one `af.filter_jit` step, whose compiled programs
they share, so the step compiles once without the cache.

Run: python examples/survey.py [--fields N] [--workers P | --threads T]
                               [--cache-dir DIR] [--results DIR]
                               [--scheduler ADDRESS]
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import optax
from distributed import Client, LocalCluster, WorkerPlugin, as_completed
from jaxtyping import Array, Float

import arrayfield as af

SIZE = 64  # pixels a side
SOURCES = 5
OPTIMISER = optax.adam(0.05)


# -- one field -------------------------------------------------------------------


class Source(af.ArrayModule):
    flux: af.Field[Float[Array, ""]]
    position: af.Field[Float[Array, "2"]]
    width: af.Field[Float[Array, ""]]

    def render(self, grid: Float[Array, "2 h w"]) -> Float[Array, "h w"]:
        offset = grid - self.position[:, None, None]
        r2 = jnp.sum(offset**2, axis=0) / self.width**2
        return self.flux * jnp.exp(-0.5 * r2)


class Scene(af.ArrayModule):
    sources: list[Source]
    background: af.Field[Float[Array, ""]] = af.field(default=0)

    def render(self) -> Float[Array, "h w"]:
        axis = jnp.arange(SIZE, dtype=jnp.float32)
        grid = jnp.stack(jnp.meshgrid(axis, axis, indexing="xy"))
        return sum(s.render(grid) for s in self.sources) + self.background


def field_truth(field: int) -> dict[str, np.ndarray]:
    """The true sources of one field: a seeded draw, the same on every machine."""
    rng = np.random.default_rng(field)
    return {
        "flux": rng.uniform(4.0, 10.0, SOURCES),
        "position": rng.uniform(6.0, SIZE - 6.0, (SOURCES, 2)),
        "width": rng.uniform(1.5, 3.0, SOURCES),
    }


def make_scene(flux: np.ndarray, position: np.ndarray, width: np.ndarray) -> Scene:
    sources = [
        Source(flux=float(f), position=p.astype(np.float32), width=float(w))
        for f, p, w in zip(flux, position, width, strict=True)
    ]
    return Scene(sources=sources, background=0.0)


def observed(field: int) -> np.ndarray:
    """The field's image: the true scene with seeded noise (as float32 data)."""
    truth = field_truth(field)
    image = np.asarray(make_scene(**truth).render())
    noise = np.random.default_rng(10_000 + field).normal(0.0, 0.1, image.shape)
    return (image + noise).astype(np.float32)


def first_guess(field: int) -> Scene:
    """Where the fit starts: every source a little off its truth."""
    truth = field_truth(field)
    return make_scene(
        truth["flux"] * 0.7, truth["position"] + 0.8, truth["width"] * 1.3
    )


def loss(scene: Scene, image: Array) -> Array:
    return jnp.mean((scene.render() - image) ** 2)


@af.filter_jit
def fit_step(
    scene: Scene, state: optax.OptState, image: Array
) -> tuple[Scene, optax.OptState, Array]:
    # The image is an argument, not a captured constant: one program for every field.
    value, grads = eqx.filter_value_and_grad(loss)(scene, image)
    updates, state = OPTIMISER.update(grads, state)
    return eqx.apply_updates(scene, updates), state, value


# -- the persistent cache --------------------------------------------------------


def use_persistent_cache(cache_dir: str | None) -> None:
    """Turn JAX's persistent compilation cache on in this process (off: None),
    keeping every program, however quick to compile: the step compiles in well
    under JAX's default threshold of one second."""
    if cache_dir is not None:
        af.use_compile_cache(cache_dir)


# -- the task: fit one field, write its result ------------------------------------


def result_path(results: Path, field: int) -> Path:
    return results / f"field-{field:05d}.npz"


def fit_field(field: int, steps: int, results: str) -> dict[str, Any]:
    """Fit one field, write `field-NNNNN.npz` atomically, return its summary."""
    with af.count_compiles() as count:
        start = time.perf_counter()
        image = jnp.asarray(observed(field))
        scene = first_guess(field)
        state = OPTIMISER.init(eqx.filter(scene, eqx.is_inexact_array))
        losses = np.empty(steps, np.float32)
        first_step_s = 0.0
        # The loop runs the step alone: what compiles in it is the step.
        with af.count_compiles() as step_count:
            for i in range(steps):
                scene, state, value = fit_step(scene, state, image)
                losses[i] = value  # waits for the step: the fit's record
                if i == 0:
                    first_step_s = time.perf_counter() - start
        fit_s = time.perf_counter() - start
    meta = {
        "field": field,
        "steps": steps,
        "fit_s": fit_s,
        "first_step_s": first_step_s,  # includes the compile or the cache read
        "pid": os.getpid(),
        "host": os.uname().nodename,
        "compiles": count.compiles,
        "step_compiles": step_count.compiles,
        "cache_loads": count.cache_reads,
        "compiled": dict(count.compiled),  # by program name, where JAX names them
    }
    arrays = {
        "flux": np.stack([np.asarray(s.flux) for s in scene.sources]),
        "position": np.stack([np.asarray(s.position) for s in scene.sources]),
        "width": np.stack([np.asarray(s.width) for s in scene.sources]),
        "background": np.asarray(scene.background),
        "losses": losses,
        "meta": np.array(json.dumps(meta)),
    }
    write_atomically(result_path(Path(results), field), arrays)
    return meta


_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read the umask (Python can only read it by setting it)


def write_atomically(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """A temporary file in the same folder, then a rename: a reader (or a rerun)
    sees the whole file or none, even if this process dies while writing."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, **arrays)
        os.chmod(name, 0o666 & ~_UMASK)  # as open() would, not mkstemp's 0600
        os.replace(name, path)
    except BaseException:
        os.unlink(name)
        raise


def read_meta(path: Path) -> dict[str, Any]:
    with np.load(path) as saved:
        return json.loads(str(saved["meta"]))


# -- the cluster -------------------------------------------------------------------


class CompileCachePlugin(WorkerPlugin):
    """Turns the cache on in every worker, also in workers that join (or
    restart) later: the scheduler keeps the plugin. It runs before the worker
    compiles the step: a program compiled before it is not written."""

    def __init__(self, cache_dir: str | None) -> None:
        self.cache_dir = cache_dir

    def setup(self, worker: Any) -> None:
        use_persistent_cache(self.cache_dir)


def run_survey(
    client: Any,
    fields: int,
    steps: int,
    results: Path,
    *,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Fit every field without a result under `results`; their summaries.

    The first missing field runs alone (the warm-up: its worker compiles the step
    and writes the cache), then the others all at once.
    """
    missing = [f for f in range(fields) if not result_path(results, f).exists()]
    bar = progress_bar(len(missing), enabled=progress)
    done: list[dict[str, Any]] = []

    def submit(batch: list[int]) -> list[Any]:
        # retries: a field that raises runs again; a field whose worker dies runs
        # again anyway (up to the scheduler's distributed.scheduler.allowed-failures).
        return [
            client.submit(
                fit_field, f, steps, str(results), key=f"field-{f:05d}", retries=2
            )
            for f in batch
        ]

    for batch in (missing[:1], missing[1:]):
        for future in as_completed(submit(batch)):
            done.append(future.result())
            bar.update(1)
    bar.close()
    return sorted(done, key=lambda meta: meta["field"])


class _PlainProgress:
    """A line per field, where tqdm is not installed."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.count, self.enabled = total, 0, enabled

    def update(self, n: int) -> None:
        self.count += n
        if self.enabled:
            print(f"fitted {self.count}/{self.total}", file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


def progress_bar(total: int, enabled: bool) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:
        return _PlainProgress(total, enabled)
    return tqdm(total=total, unit="field", disable=not enabled)


def summary(
    fields: int,
    workers: int,
    results: Path,
    fitted: list[dict[str, Any]],
    wall_s: float,
) -> dict[str, Any]:
    done = sum(result_path(results, f).exists() for f in range(fields))
    return {
        "fields": fields,
        "done": done,
        "fitted": len(fitted),
        "workers": workers,
        "step_compiles": sum(meta["step_compiles"] for meta in fitted),
        "wall_s": round(wall_s, 2),
    }


def print_report(fitted: list[dict[str, Any]], result: dict[str, Any]) -> None:
    per_process: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for meta in fitted:
        per_process.setdefault((meta["host"], meta["pid"]), []).append(meta)
    if fitted:
        print("process (host:pid)   fields  compiles  step compiles  cache reads")
    for (host, pid), metas in sorted(per_process.items()):
        print(
            f"{host + ':' + str(pid):20s} {len(metas):6d} "
            f"{sum(m['compiles'] for m in metas):9d} "
            f"{sum(m['step_compiles'] for m in metas):14d} "
            f"{sum(m['cache_loads'] for m in metas):12d}"
        )
    if fitted:
        fit_s = sorted(m["fit_s"] for m in fitted)
        print(
            f"warm-up: field {fitted[0]['field']} alone first; "
            f"fit time per field: median {fit_s[len(fit_s) // 2]:.2f} s"
        )
    print(json.dumps(result))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fields", type=int, default=6, help="fields to fit")
    parser.add_argument(
        "--workers", type=int, default=2, help="worker processes (one thread each)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        metavar="T",
        help="fit on T threads of one worker in this process instead (Dask's "
        "threaded workers): the threads share one af.filter_jit step, so the "
        "step compiles once, with no cache needed",
    )
    parser.add_argument("--steps", type=int, default=300, help="optax steps a field")
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="use this running cluster instead of starting one (--workers ignored)",
    )
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="JAX's persistent compilation cache, shared by every worker "
        "(default: a new temporary folder)",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="run without the persistent cache"
    )
    parser.add_argument(
        "--results",
        metavar="DIR",
        help="one file per field; fields already there are not fitted again "
        "(default: a new temporary folder)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)

    results = Path(args.results or tempfile.mkdtemp(prefix="survey-results-"))
    results.mkdir(parents=True, exist_ok=True)
    cache_dir = None
    if not args.no_cache:
        cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="survey-jax-cache-")
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        cache_dir = str(Path(cache_dir).resolve())

    cluster = None
    if args.scheduler:
        client = Client(args.scheduler)
        # The workers of a cluster started elsewhere cannot import this script.
        client.upload_file(__file__)
    elif args.threads:
        cluster = LocalCluster(
            n_workers=1,
            threads_per_worker=args.threads,
            processes=False,
            dashboard_address=None,
        )
        client = Client(cluster)
    else:
        cluster = LocalCluster(
            n_workers=args.workers, threads_per_worker=1, dashboard_address=None
        )
        client = Client(cluster)
    try:
        client.register_plugin(
            CompileCachePlugin(cache_dir), name="survey-compile-cache"
        )
        workers = len(client.scheduler_info()["workers"])
        start = time.perf_counter()  # the cluster is up: time the fields only
        fitted = run_survey(
            client, args.fields, args.steps, results, progress=not args.no_progress
        )
        wall_s = time.perf_counter() - start
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    print(f"results: {results}")
    print_report(fitted, summary(args.fields, workers, results, fitted, wall_s))
    return 0


if __name__ == "__main__":
    # The workers unpickle `fit_field` by module name: import it from `survey`,
    # not from `__main__`, which is a different module in every process.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import survey

    sys.exit(survey.main())
