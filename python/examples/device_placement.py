"""The seed's DevicePlacement usage examples (artifex device_placement docs),
run against placementd. Differences from the seed text, and only these:
  * import lines: `from placement import ...` for the artifex module,
    `import placement as jax` (placement.devices() is jax.devices() for the
    daemon's devices), `from placement.sharding import ...` for jax.sharding;
    with JAX installed the original `import jax` / `from jax.sharding import`
    lines work too (JAX devices map to daemon devices by index);
  * jnp -> np where data is built;
  * `process_batch`, left undefined by the seed, is defined;
  * `jax.devices("gpu")[:2]` needs GPUs: on a daemon without them (its
    RuntimeError is JAX's) the example replicates to the first two devices.
The daemon: $PLACEMENT_TARGET, else 127.0.0.1:50051.
"""
# --- Basic Device Placement ------------------------------------------------
from placement import (
    DevicePlacement,
    place_on_device,
)
import numpy as jnp

# Create placement utility
placement = DevicePlacement()
print(f"Detected hardware: {placement.hardware_type}")
print(f"Available devices: {placement.num_devices}")

# Place data on default device
data = jnp.ones((32, 784))
placed_data = placement.place_on_device(data)

# Or use convenience function
placed_data = place_on_device(data)

# --- Batch Size Validation -------------------------------------------------
from placement import (
    DevicePlacement,
    HardwareType,
    get_batch_size_recommendation,
)

# Get recommendation for current hardware
placement = DevicePlacement()
rec = placement.get_batch_size_recommendation()
print(f"Optimal batch size: {rec.optimal_batch_size}")
print(f"Critical batch size: {rec.critical_batch_size}")

# Get recommendation for specific hardware
h100_rec = get_batch_size_recommendation(HardwareType.H100)
print(f"H100 critical batch: {h100_rec.critical_batch_size}")  # 298

# Validate batch size
is_valid, message = placement.validate_batch_size(256)
print(f"Valid: {is_valid}, Message: {message}")

# --- Distributing Batches with Sharding --------------------------------------
from placement import (
    DevicePlacement,
    distribute_batch,
)
from placement.sharding import Mesh, NamedSharding, PartitionSpec
import placement as jax
import numpy as np

# Create device mesh
devices = jax.devices()
mesh = Mesh(np.array(devices), axis_names=("data",))

# Create sharding for batch dimension
data_sharding = NamedSharding(mesh, PartitionSpec("data", None))

# Distribute data
placement = DevicePlacement()
batch = {"images": np.ones((8, 28, 28, 3)), "labels": np.zeros((8,))}
distributed = placement.distribute_batch(batch, data_sharding)

# Or use convenience function
distributed = distribute_batch(batch, data_sharding)
print(f"Distributed images: {distributed['images']}")

# --- Sharding Along Batch Dimension ------------------------------------------
from placement import DevicePlacement
from placement.sharding import Mesh
import placement as jax
import numpy as np

placement = DevicePlacement()

# Create mesh
devices = jax.devices()
mesh = Mesh(np.array(devices), axis_names=("data",))

# Shard batch along first dimension
batch = {
    "images": np.ones((16, 224, 224, 3)),
    "labels": np.zeros((16,), dtype=np.int32),
}
sharded_batch = placement.shard_batch_dim(batch, mesh)
print(f"Sharded labels: {sharded_batch['labels'].sharding}")

# --- Prefetching Data to Device ----------------------------------------------
from placement import DevicePlacement

placement = DevicePlacement()
processed = []


def process_batch(batch):  # not defined by the seed
    processed.append(float(np.asarray(batch["batch"])[0, 0]))


# Create a data iterator
def data_generator():
    for i in range(100):
        yield {"batch": jnp.ones((32, 784)) * i}


# Prefetch data to GPU with buffer of 2 batches
prefetched = placement.prefetch_to_device(
    data_generator(),
    buffer_size=2,
)

# Training loop with prefetched data
for batch in prefetched:
    # Data is already on GPU when we receive it
    process_batch(batch)
print(f"Prefetched batches processed: {len(processed)}, in order: "
      f"{processed == [float(i) for i in range(100)]}")

# --- Replicating Model Weights -----------------------------------------------
from placement import DevicePlacement

placement = DevicePlacement()

# Model weights to replicate
weights = {
    "layer1": jnp.ones((784, 256)),
    "layer2": jnp.ones((256, 10)),
}

# Replicate across all devices
replicated_weights = placement.replicate_across_devices(weights)

# Or replicate to specific devices
try:
    gpu_devices = jax.devices("gpu")[:2]
except RuntimeError:  # a daemon without GPUs (jax.devices("gpu") raises the same way)
    gpu_devices = jax.devices()[:2]
replicated_weights = placement.replicate_across_devices(weights, devices=gpu_devices)
print(f"Replicated layer2 on {len(replicated_weights['layer2'].addressable_shards)} devices")

# --- Getting Device Information ------------------------------------------------
from placement import DevicePlacement

placement = DevicePlacement()
info = placement.get_device_info()

print(f"Number of devices: {info['num_devices']}")
print(f"Hardware type: {info['hardware_type']}")
print(f"Platforms: {info['platforms']}")

for device in info['devices']:
    print(f"  Device {device['id']}: {device['platform']} ({device['device_kind']})")
