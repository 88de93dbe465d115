"""The seed's DataParallel usage examples (artifex data_parallel docs), run
against placementd. Differences from the seed text:
  * import lines (placement for artifex); jnp -> np where data is built;
  * "Sharding Model State" uses the `model_state` the seed leaves undefined;
  * "Gradient Aggregation" and "Complete Training Example" are JAX programs
    (jax.pmap, flax.nnx, optax): the daemon reduces gradients that are
    already on its devices, so here per-device gradients are computed with
    numpy, placed one block per device, and all_reduce_gradients_static
    averages them on the daemon -- the same call with the same arguments.
The daemon: $PLACEMENT_TARGET, else 127.0.0.1:50051 (4+ devices; 8 for the
training loop's even split)."""
# --- Basic Data Parallel Training ----------------------------------------------
from placement import (
    DeviceMeshManager,
    DataParallel,
)
import numpy as jnp

# Create mesh and data parallel utilities
manager = DeviceMeshManager()
mesh = manager.create_data_parallel_mesh()
dp = DataParallel()

# Create sharding for batch data
sharding = dp.create_data_parallel_sharding(mesh)

# Shard batch data
batch = {"inputs": jnp.ones((32, 784)), "targets": jnp.zeros((32,))}
sharded_batch = dp.shard_batch(batch, sharding)
print(f"Sharded inputs: {sharded_batch['inputs']}")

# --- Sharding Model State ------------------------------------------------------
model_state = {"w": jnp.ones((784, 256)), "b": jnp.zeros((256,))}  # not defined by the seed

# Replicate model parameters across all devices (default for data parallelism)
sharded_state = dp.shard_model_state(model_state, mesh, param_sharding="replicate")

# Or shard parameters across devices (for model parallelism)
sharded_state = dp.shard_model_state(model_state, mesh, param_sharding="shard")
print(f"Sharded w: {sharded_state['w'].sharding}")

# --- Gradient Aggregation (adapted: per-device gradients on the daemon) ---------
import numpy as np
from placement import NamedSharding, PartitionSpec

grad_mesh = manager.create_data_parallel_mesh(axis_name="batch")  # the seed's default axis
n = grad_mesh.size
# What each device's train_step would produce: one gradient per device, stacked.
per_device = {"w": np.stack([np.full((4,), float(i)) for i in range(n)]),
              "b": np.arange(n, dtype=np.float64).reshape(n, 1)}
grads = dp.shard_batch(per_device, NamedSharding(grad_mesh, PartitionSpec("batch")))

# Average gradients across devices
grads = DataParallel.all_reduce_gradients_static(grads, reduce_type="mean")
print(f"Mean gradient w: {np.asarray(grads['w'])}")

# --- Using Static Methods --------------------------------------------------------
# Static methods don't require instantiation
from placement import DataParallel

mesh = manager.create_device_mesh({"data": 4})
sharding = DataParallel.create_data_parallel_sharding_static(mesh)
sharded_batch = DataParallel.shard_batch_static(batch, sharding)
print(f"Static sharding: {sharding}")

# --- Complete Training Example (adapted: linear regression in numpy) --------------
from placement import (
    DeviceMeshManager,
    DataParallel,
)

# Setup
manager = DeviceMeshManager()
mesh = manager.create_data_parallel_mesh(axis_name="batch")
dp = DataParallel()
devices = mesh.size

rng = np.random.default_rng(0)
true_w = np.array([2.0, -3.0, 0.5])
w = np.zeros(3)
data_sharding = dp.create_data_parallel_sharding(mesh, data_axis="batch")
params = dp.shard_model_state({"w": w}, mesh)  # replicated


def dataloader(steps, size=64):
    for _ in range(steps):
        x = rng.standard_normal((size, 3))
        yield {"x": x, "y": x @ true_w}


# Training loop
for batch in dataloader(60):
    sharded_batch = dp.shard_batch(batch, data_sharding)
    # Each device's gradient on its slice of the batch (computed here from its shard).
    per_device = []
    for xs, ys in zip(sharded_batch["x"].addressable_shards,
                      sharded_batch["y"].addressable_shards):
        x, y = xs.data, ys.data
        per_device.append(2 * x.T @ (x @ w - y) / len(x))
    grads = dp.shard_batch({"w": np.stack(per_device)}, data_sharding)
    grads = dp.all_reduce_gradients(grads)  # mean over "batch", on the daemon
    w = w - 0.1 * np.asarray(grads["w"])[0]
print(f"Learned w: {np.round(w, 3)} (true {true_w})")
