"""Places a pytree under one PlacementRule: host leaves (numpy arrays,
scalars, JAX arrays) in one UploadBatch stream, RemoteArray leaves in one
Place call (device to device, never through this process). The result has
the input's structure with RemoteArray leaves; None stays None.

Every leaf is placed or none is: a failure of the second call deletes what
the first made. Rules are built here from the seeds' arguments.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

from placement import _dtypes, _progress, _tree, errors
from placement.array import RemoteArray, is_remote
from placement.client import Client
from placement.devices import device_id
from placement.sharding import NamedSharding, SingleDeviceSharding, as_mesh, as_sharding
from placement.v1 import tensor_service_pb2 as pb


def place_tree(client: Client, data: Any, rule: Optional[pb.PlacementRule], *,
               process_local: Optional[pb.ProcessLocal] = None,
               progress: Optional[_progress.ProgressFn] = None) -> Any:
    """With `process_local` (a multi-controller batch, placement.cluster)
    every leaf must be a host array: this process's part. `progress` follows
    the host leaves' bytes (one upload stream)."""
    leaves, treedef, keys = _tree.flatten(data, is_leaf=is_remote)
    if not leaves:
        return data
    results: List[Any] = [None] * len(leaves)
    remote = [(i, x) for i, x in enumerate(leaves) if is_remote(x)]
    if remote and process_local is not None:
        i, x = remote[0]
        raise errors.InvalidArgumentError(
            f"{keys[i]} is already a daemon tensor ({x.id}); a multi-controller upload "
            f"(global_name '{process_local.global_name}') takes this process's host arrays")
    host = [(i, keys[i], _dtypes.as_host_array(x)) for i, x in enumerate(leaves)
            if not is_remote(x)]
    made: List[RemoteArray] = []
    try:
        if remote:
            for _, x in remote:
                if x.client is not client:
                    raise errors.InvalidArgumentError(
                        f"tensor {x.id} belongs to the daemon at {x.client.target}, not "
                        f"{client.target}")
            infos = client.tensors.place([x.id for _, x in remote],
                                         rule or pb.PlacementRule())
            for (i, _), info in zip(remote, infos):
                results[i] = RemoteArray(client, info)
                made.append(results[i])
        if host:
            infos = client.tensors.upload_batch([(k, a) for _, k, a in host], rule,
                                                process_local=process_local, progress=progress)
            for (i, _, _), info in zip(host, infos):
                results[i] = RemoteArray(client, info)
    except BaseException:
        for r in made:
            r.delete()
        raise
    return _tree.unflatten(treedef, results)


def device_rule(device: Any) -> pb.PlacementRule:
    rule = pb.PlacementRule()
    rule.placement.device_id = device_id(device)
    return rule


def sharding_rule(client: Client, sharding: Any) -> pb.PlacementRule:
    """A NamedSharding / SingleDeviceSharding (ours or JAX's) or a device."""
    s = as_sharding(sharding)
    rule = pb.PlacementRule()
    if isinstance(s, SingleDeviceSharding):
        rule.placement.CopyFrom(s.to_placement())
    else:
        assert isinstance(s, NamedSharding)
        rule.placement.CopyFrom(s.to_placement(client.mesh_id(s.mesh)))
    return rule


def shard_batch_dim_rule(client: Client, mesh: Any, batch_axis: int,
                         mesh_axis: str) -> pb.PlacementRule:
    rule = pb.PlacementRule()
    rule.shard_batch_dim.mesh_id = client.mesh_id(mesh)
    rule.shard_batch_dim.batch_axis = int(batch_axis)
    rule.shard_batch_dim.mesh_axis = mesh_axis
    return rule


def replicate_rule(devices: Optional[Sequence[Any]]) -> pb.PlacementRule:
    rule = pb.PlacementRule()
    rule.replicate.SetInParent()
    if devices is not None:
        rule.replicate.device_ids.extend(device_id(d) for d in devices)
    return rule


def model_state_rule(client: Client, mesh: Any, param_sharding: str) -> pb.PlacementRule:
    if param_sharding not in ("replicate", "shard"):
        raise errors.InvalidArgumentError(
            f"Unsupported param_sharding: '{param_sharding}'. Use 'replicate' or 'shard'.")
    rule = pb.PlacementRule()
    rule.model_state.mesh_id = client.mesh_id(as_mesh(mesh))
    rule.model_state.param_sharding = param_sharding
    return rule


def data_partition_rule(client: Client, mesh: Any, replicated: bool) -> pb.PlacementRule:
    rule = pb.PlacementRule()
    rule.data_partition.mesh_id = client.mesh_id(as_mesh(mesh))
    rule.data_partition.partition = (pb.DATA_PARTITION_REPLICATED if replicated
                                     else pb.DATA_PARTITION_FULL)
    return rule
