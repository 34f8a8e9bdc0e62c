"""Train a scalar-built ArrayModule on 8 simulated CPU devices; print a JSON report.

Run by tests/test_sharding.py in a fresh process, because
`XLA_FLAGS=--xla_force_host_platform_device_count=8` only takes effect if it is
set before JAX initialises its backends.
"""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from jaxtyping import Array, Float

import arrayfield as af

STEPS = 5


class Linear(af.ArrayModule):
    weight: Float[Array, "3"]
    bias: Float[Array, ""]
    scale: Float[Array, ""] = 1  # a Python int default


def loss_fn(model: Linear, x: jax.Array, y: jax.Array) -> jax.Array:
    prediction = model.scale * (x @ model.weight) + model.bias
    return jnp.mean((prediction - y) ** 2)


def train(model, x, y, param_sharding=None, data_sharding=None):
    """`STEPS` Adam steps; returns (model, losses, number of traces)."""
    optimiser = optax.adam(0.05)
    traces = []

    @eqx.filter_jit
    def step(model, opt_state, x, y):
        traces.append(None)
        if data_sharding is not None:
            x, y = eqx.filter_shard((x, y), data_sharding)
            model = eqx.filter_shard(model, param_sharding)
        loss, grads = eqx.filter_value_and_grad(loss_fn)(model, x, y)
        updates, opt_state = optimiser.update(grads, opt_state, model)
        model = eqx.apply_updates(model, updates)
        if param_sharding is not None:
            model = eqx.filter_shard(model, param_sharding)
        return model, opt_state, loss

    opt_state = optimiser.init(eqx.filter(model, eqx.is_array))
    if param_sharding is not None:
        # Optimiser state lives with the parameters; left on one device, its step
        # count would come back replicated after step 1 and cause a second trace.
        opt_state = jax.device_put(opt_state, param_sharding)
    losses = []
    for _ in range(STEPS):
        model, opt_state, loss = step(model, opt_state, x, y)
        losses.append(float(loss))
    return model, losses, len(traces)


def main() -> None:
    model = Linear(weight=[0.5, -1, 2], bias=0)
    leaves = jax.tree_util.tree_leaves(model)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3)).astype(np.float32)
    y = (x @ np.array([1.0, 2.0, -0.5], np.float32) + 0.3).astype(np.float32)

    single, single_losses, single_traces = train(model, jnp.asarray(x), jnp.asarray(y))

    mesh = Mesh(np.array(jax.devices()), ("batch",))
    replicated = NamedSharding(mesh, P())
    batch = NamedSharding(mesh, P("batch"))
    placed = jax.device_put(model, replicated)
    x_sharded = jax.device_put(x, batch)
    y_sharded = jax.device_put(y, batch)
    sharded, sharded_losses, sharded_traces = train(
        placed, x_sharded, y_sharded, replicated, batch
    )

    def leaves_of(tree):
        return [np.asarray(leaf).tolist() for leaf in jax.tree_util.tree_leaves(tree)]

    report = {
        "device_count": jax.device_count(),
        "converted_dtypes": [str(leaf.dtype) for leaf in leaves],
        "converted_weak": [leaf.weak_type for leaf in leaves],
        "committed_before_placement": [leaf.committed for leaf in leaves],
        "placed_committed": [
            leaf.committed for leaf in jax.tree_util.tree_leaves(placed)
        ],
        "data_devices": len(x_sharded.sharding.device_set),
        "data_shard_shapes": sorted(
            {s.data.shape for s in x_sharded.addressable_shards}
        ),
        "trained_replicated": [
            leaf.sharding.is_equivalent_to(replicated, leaf.ndim)
            for leaf in jax.tree_util.tree_leaves(sharded)
        ],
        "single_traces": single_traces,
        "sharded_traces": sharded_traces,
        "single_losses": single_losses,
        "sharded_losses": sharded_losses,
        "single_leaves": leaves_of(single),
        "sharded_leaves": leaves_of(sharded),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
