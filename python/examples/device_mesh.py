"""The seed's DeviceMeshManager usage examples (artifex mesh docs), run
against placementd. Only the import lines differ from the seed (placement
for artifex and jax.sharding). The daemon: $PLACEMENT_TARGET, else
127.0.0.1:50051 (it needs at least 4 devices)."""
# --- Basic Usage -------------------------------------------------------------
from placement import DeviceMeshManager

# Create manager (uses all available devices)
manager = DeviceMeshManager()
print(f"Available devices: {manager.num_devices}")

# Create a data-parallel mesh using all devices
mesh = manager.create_data_parallel_mesh()

# --- Data Parallelism ----------------------------------------------------------
# Create mesh for data parallelism with 4 devices
manager = DeviceMeshManager()
mesh = manager.create_data_parallel_mesh(num_devices=4, axis_name="batch")

# Use the mesh with JAX sharding
from placement.sharding import NamedSharding, PartitionSpec

# Shard data along batch dimension
data_sharding = NamedSharding(mesh, PartitionSpec("batch"))

# --- Model Parallelism ---------------------------------------------------------
# Create mesh for model parallelism
manager = DeviceMeshManager()
mesh = manager.create_model_parallel_mesh(num_devices=2, axis_name="model")

# Shard model parameters
param_sharding = NamedSharding(mesh, PartitionSpec(None, "model"))

# --- Hybrid Parallelism --------------------------------------------------------
# Create 2D mesh: 2 devices for data, 2 for model (total 4 devices)
manager = DeviceMeshManager()
mesh = manager.create_hybrid_mesh(
    data_parallel_size=2,
    model_parallel_size=2,
    data_axis="data",
    model_axis="model",
)

# Get mesh info
info = manager.get_mesh_info(mesh)
print(f"Total devices: {info['total_devices']}")
print(f"Axes: {info['axes']}")  # {'data': 2, 'model': 2}

# --- Using Dict or List Specification ------------------------------------------
manager = DeviceMeshManager()

# Using dict specification
mesh_dict = manager.create_device_mesh({"data": 2, "model": 1})

# Using list of tuples specification
mesh_list = manager.create_device_mesh([("data", 2), ("model", 1)])
print(f"Same mesh from dict and list: {mesh_dict == mesh_list}")
