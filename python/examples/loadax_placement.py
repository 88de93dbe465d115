"""loadax's placement helpers against placementd: a host batch becomes one
global array split over every device of the mesh, and comes back as this
host's rows. The daemon: $PLACEMENT_TARGET, else 127.0.0.1:50051."""
import numpy as np

from placement import (DataPartitionType, DeviceMeshManager, global_to_host_array,
                       host_to_global_device_array)

mesh = DeviceMeshManager().create_hybrid_mesh(data_parallel_size=2, model_parallel_size=4)
host_batch = {"tokens": np.arange(16 * 8, dtype=np.int32).reshape(16, 8),
              "mask": np.ones((16,), dtype=np.bool_)}

with mesh:
    global_batch = host_to_global_device_array(host_batch)  # DataPartitionType.FULL
    print(f"Global tokens: {global_batch['tokens']}")
    rows = global_to_host_array(global_batch)
    print(f"Round trip equal: {np.array_equal(rows['tokens'], host_batch['tokens'])}")

    replicated = host_to_global_device_array(host_batch, partition=DataPartitionType.REPLICATED)
    first = global_to_host_array(replicated, partition=DataPartitionType.REPLICATED)
    print(f"Replicated mask on {len(replicated['mask'].addressable_shards)} devices, "
          f"first shard equal: {np.array_equal(first['mask'], host_batch['mask'])}")

    try:
        host_to_global_device_array({"x": np.ones((10, 3))})
    except ValueError as e:
        print(f"Error: {e}")
