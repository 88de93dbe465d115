"""placement: the Python client of placementd.

The seeds' APIs (artifex DevicePlacement / DeviceMeshManager / DataParallel,
loadax host_to_global_device_array) with their names, defaults and messages,
served by a placementd daemon; jax.sharding-style Mesh / NamedSharding /
PartitionSpec; RemoteArray handles; a JAX bridge (to_jax / from_jax);
JAX's multi-process API over a cluster of daemons (placement.cluster).

    import placement
    placement.connect("127.0.0.1:50051")     # or set PLACEMENT_TARGET
    dp = placement.DevicePlacement()
    x = dp.place_on_device(np.ones((32, 784), np.float32))
"""
from placement._transport import SessionPolicy, TransferPath, TransportOptions
from placement._version import __version__
from placement import collectives, types
from placement.api import (delete, device_count, device_put, devices, local_device_count,
                           local_devices, lookup, make_array_from_single_device_arrays)
from placement.array import RemoteArray, Shard
from placement.client import Client, connect, default_client
from placement.cluster import (Controller, make_array_from_process_local_data, process_count,
                               process_index, process_indices, sync_global_devices)
from placement.data_parallel import DataParallel
from placement.device_placement import (BatchSizeRecommendation, DevicePlacement, HardwareType,
                                        Roofline, distribute_batch,
                                        get_batch_size_recommendation, place_on_device)
from placement.devices import Device
from placement.errors import PlacementError
from placement.jax_bridge import from_jax, to_jax
from placement.loadax import (DataPartitionType, global_to_host_array,
                              host_to_global_device_array, with_sharding_constraint)
from placement.mesh_manager import DeviceMeshManager
from placement.prefetch import PrefetchIterator
from placement.regions import SharedRegion
from placement.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding
from placement.types import DaemonStatus, PrefetchStats, ShardInfo, TensorInfo

__all__ = [
    "__version__", "connect", "default_client", "Client", "TransportOptions", "TransferPath",
    "SessionPolicy", "types", "TensorInfo", "ShardInfo", "DaemonStatus", "PrefetchStats",
    "PlacementError", "SharedRegion",
    "Device", "devices", "local_devices", "device_count", "local_device_count", "device_put",
    "lookup", "delete", "process_index", "process_count", "process_indices", "Controller",
    "make_array_from_process_local_data", "sync_global_devices", "collectives",
    "make_array_from_single_device_arrays", "RemoteArray", "Shard",
    "Mesh", "NamedSharding", "PartitionSpec", "SingleDeviceSharding",
    "HardwareType", "BatchSizeRecommendation", "Roofline", "DevicePlacement",
    "place_on_device", "distribute_batch", "get_batch_size_recommendation",
    "DeviceMeshManager", "DataParallel",
    "DataPartitionType", "host_to_global_device_array", "global_to_host_array",
    "with_sharding_constraint", "PrefetchIterator", "to_jax", "from_jax",
]
