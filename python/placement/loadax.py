"""loadax's placement helpers (loadax.sharding.placement), over the daemon.

    with mesh:                                     # a placement or JAX Mesh
        batch = host_to_global_device_array({"x": x, "y": y})
        rows = global_to_host_array(batch)         # this node's rows, numpy

host_to_global_device_array uploads each leaf straight into the global
sharding (TensorService UploadBatch with a DataPartitionRule): FULL splits
dimension 0 over the product of every mesh axis, REPLICATED copies it to
every device. The daemon's errors are loadax's: "({shape}) cannot be sharded
across {n} devices." and "Unsupported partition: ...".

Several nodes (a cluster, docs/cluster.md), as loadax runs on several
hosts: every node's trainer calls host_to_global_device_array with its own
host arrays, the same mesh (spanning the nodes) and the same
`global_name`; the calls meet on the daemons and make one global array per
leaf ("<global_name>/<key>"), of shape [rows x processes, ...] for FULL
(each host's rows must divide by its own device count), the host shape for
REPLICATED. No bytes cross nodes. global_to_host_array then gives each node
its own rows. Without `global_name` the host arrays are the global arrays
(one trainer holds the whole batch, as on a single node), whichever daemons
the mesh spans.
"""
from __future__ import annotations

import enum
from typing import Any, List, Optional

import numpy as np

from placement import _placing, _tree, cluster, errors
from placement.array import RemoteArray, is_remote
from placement.client import Client, resolve
from placement.sharding import Mesh, NamedSharding, PartitionSpec, as_sharding, current_mesh


class DataPartitionType(enum.Enum):
    """How a global array is partitioned across the mesh."""

    FULL = "full"
    REPLICATED = "replicated"


def _check_partition(partition: Any) -> bool:
    """True for REPLICATED; NotImplementedError for anything not a member."""
    if partition == DataPartitionType.FULL:
        return False
    if partition == DataPartitionType.REPLICATED:
        return True
    raise NotImplementedError(f"Unsupported partition: {partition}")


def _mesh(mesh: Optional[Any]) -> Mesh:
    found = mesh if mesh is not None else current_mesh()
    if found is None:
        raise errors.InvalidArgumentError(
            "host_to_global_device_array must be called within the context of a Mesh "
            "(`with mesh:`), or be given mesh=")
    return found


def host_to_global_device_array(host_arrays: Any,
                                partition: DataPartitionType = DataPartitionType.FULL, *,
                                mesh: Optional[Any] = None,
                                global_name: Optional[str] = None,
                                timeout: Optional[float] = None,
                                client: Optional[Client] = None) -> Any:
    """Converts host arrays (a pytree) to global device arrays partitioned
    according to `partition` over the current mesh.

    `global_name`: this host's part of a multi-node batch (module
    docstring); every node's trainer passes the same name, and the call
    returns once all have (DeadlineExceededError naming the missing
    processes after `timeout` seconds, default 60)."""
    replicated = _check_partition(partition)
    process_local = None
    if global_name is not None:
        process_local = cluster.process_local_proto(global_name, None, timeout)
    elif timeout is not None:
        raise errors.InvalidArgumentError(
            "timeout is for multi-node uploads: give global_name too")
    c = resolve(client)
    return _placing.place_tree(c, host_arrays,
                               _placing.data_partition_rule(c, _mesh(mesh), replicated),
                               process_local=process_local)


def global_to_host_array(global_arrays: Any,
                         partition: DataPartitionType = DataPartitionType.FULL, *,
                         client: Optional[Client] = None) -> Any:
    """This node's part of each global array, as numpy: FULL -> its rows
    (the distinct shards its devices hold, concatenated in index order);
    REPLICATED -> its first shard. "This node" is the daemon the client
    talks to (`client`, else the arrays' own client)."""
    replicated = _check_partition(partition)
    leaves, treedef, keys = _tree.flatten(global_arrays, is_leaf=is_remote)
    if not leaves:
        return global_arrays
    for key, leaf in zip(keys, leaves):
        if not isinstance(leaf, RemoteArray):
            raise errors.InvalidArgumentError(
                f"global_to_host_array: {key} is a {type(leaf).__name__}, not a "
                f"global array (RemoteArray)")
    first = leaves[0]
    c = resolve(client) if client is not None else first.client
    if not replicated:
        batch = first.shape[0] if first.shape else None
        for key, leaf in zip(keys, leaves):
            if not leaf.shape:
                raise errors.InvalidArgumentError(
                    f"global_to_host_array: {key} is a scalar; FULL partition needs "
                    f"a batch dimension")
            if leaf.shape[0] != batch:
                raise errors.InvalidArgumentError(
                    f"global_to_host_array: batch size mismatch: {key} has "
                    f"{leaf.shape[0]} rows, {keys[0]} has {batch}")
    process = c.process_index
    out: List[np.ndarray] = []
    for leaf in leaves:
        if replicated:
            local = [s for s in leaf._info.shards if s.process_index == process]
            if not local:
                raise errors.NotFoundError(
                    f"tensor '{leaf.id}' has no shard on process {process}")
            out.append(c.tensors.download(leaf.id, device_id=local[0].device_id,
                                          info=leaf._info)[1])
        else:
            out.append(c.tensors.download(leaf.id, process_index=process, info=leaf._info)[1])
    return _tree.unflatten(treedef, out)


def with_sharding_constraint(x: Any, shardings: Any, *, client: Optional[Client] = None) -> Any:
    """Places `x` (a pytree) with `shardings` (one sharding or
    PartitionSpec for every leaf); a no-op when the current mesh is empty or
    has one device, as in loadax."""
    mesh = current_mesh()
    if mesh is None or mesh.size <= 1:
        return x
    if isinstance(shardings, PartitionSpec) or (isinstance(shardings, tuple)
                                                and not hasattr(shardings, "mesh")):
        shardings = NamedSharding(mesh, PartitionSpec(*shardings))
    c = resolve(client)
    return _placing.place_tree(c, x, _placing.sharding_rule(c, as_sharding(shardings)))
