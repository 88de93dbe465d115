"""Multi-node calls: JAX's multi-process API over a cluster of daemons.

N placementd daemons, one per node, form one cluster (docs/cluster.md):
every daemon lists every device under one global id, meshes span nodes and
a global tensor has one id everywhere. A trainer talks to its own node's
daemon, as a JAX process talks to its local devices, and asks it who it is:

    placement.connect(my_nodes_daemon)
    placement.process_index(), placement.process_count()   # 1, 2
    placement.devices()          # all 8 devices of the cluster
    placement.local_devices()    # this node's 4

Two ways to drive work on tensors that span daemons (`Controller`):
  * single: one call drives every daemon (any trainer, any daemon; bytes
    move between daemons as needed). The default everywhere.
  * multi: JAX's multi-controller model. Every process's trainer makes the
    same call on its own daemon; the calls meet (a barrier through the
    coordinator) and run once. Uploads meet by `global_name`
    (make_array_from_process_local_data, loadax host_to_global_device_array
    with global_name=...), collectives by their arguments (controller="multi").

A multi-controller result is one tensor cluster-wide, and every process
gets a handle to it. Deleting it on any process deletes it everywhere, so a
process deletes its handle only once every process is done with the tensor
(a later multi-controller call, or sync_global_devices, is such a point);
the other handles' deletes then find nothing and do nothing. On a lone
daemon every call here means what it means with one process.
"""
from __future__ import annotations

import enum
from typing import Any, List, Optional, Sequence, Union

import numpy as np

from placement import _dtypes, errors
from placement.array import RemoteArray
from placement.client import Client, resolve
from placement.sharding import (Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding,
                                as_sharding)
from placement.v1 import tensor_service_pb2 as pb
from placement.v1 import types_pb2

MAX_GLOBAL_NAME_BYTES = 256


class Controller(str, enum.Enum):
    """Who drives a call on tensors whose shards live on several daemons
    (types.proto Controller). The strings work wherever one is taken.

    SINGLE: this call alone drives every daemon that holds shards.
    MULTI: every process's trainer makes the same call on its own daemon;
      the calls meet and run once, and each returns the same result.
    """

    SINGLE = "single"
    MULTI = "multi"

    @classmethod
    def of(cls, value: Union[None, str, "Controller"]) -> Optional["Controller"]:
        """None stays None (the daemon's default, single)."""
        if value is None:
            return None
        try:
            return cls(value)
        except ValueError:
            raise errors.InvalidArgumentError(
                f"controller is {value!r}; expected 'single' or 'multi'") from None

    @staticmethod
    def to_proto(value: Union[None, str, "Controller"]) -> int:
        chosen = Controller.of(value)
        if chosen is None:
            return types_pb2.CONTROLLER_UNSPECIFIED
        return types_pb2.CONTROLLER_MULTI if chosen is Controller.MULTI \
            else types_pb2.CONTROLLER_SINGLE


def process_local_proto(global_name: Any, global_shape: Optional[Sequence[int]] = None,
                        timeout: Optional[float] = None) -> pb.ProcessLocal:
    """The ProcessLocal header of a multi-controller upload, checked as the
    daemon checks it (same words) before any byte moves. `timeout`: seconds
    to wait for the other processes (None: the daemon's 60 s)."""
    if not isinstance(global_name, str):
        raise errors.InvalidArgumentError(
            f"global_name must be a str, got {type(global_name).__name__}: {global_name!r}")
    size = len(global_name.encode())
    if size == 0 or size > MAX_GLOBAL_NAME_BYTES:
        raise errors.InvalidArgumentError(
            f"process_local.global_name is {size} bytes; it must be 1..{MAX_GLOBAL_NAME_BYTES}")
    out = pb.ProcessLocal(global_name=global_name)
    if global_shape is not None:
        dims = [int(d) for d in global_shape]
        if any(d < 0 for d in dims):
            raise errors.InvalidArgumentError(
                f"global_shape {tuple(dims)} has a negative dimension")
        out.global_shape.extend(dims)
    if timeout is not None:
        if not 0 < timeout <= 3600:
            raise errors.InvalidArgumentError(
                f"timeout is {timeout}s; it must be in (0, 3600]")
        out.timeout.FromNanoseconds(int(round(timeout * 1e9)))
    return out


# --- Who am I ---------------------------------------------------------------------
def process_index(*, client: Optional[Client] = None) -> int:
    """jax.process_index(): the index of the connected daemon's node."""
    return resolve(client).process_index


def process_count(*, client: Optional[Client] = None) -> int:
    """jax.process_count(): daemons (nodes) in the cluster; 1 for a lone daemon."""
    return resolve(client).process_count


def process_indices(*, client: Optional[Client] = None) -> List[int]:
    """jax.process_indices(): every process index, ascending."""
    return list(range(resolve(client).process_count))


# --- Multi-controller uploads -------------------------------------------------------
def make_array_from_process_local_data(sharding: Any, local_data: Any,
                                       global_shape: Optional[Sequence[int]] = None, *,
                                       global_name: str, timeout: Optional[float] = None,
                                       client: Optional[Client] = None) -> RemoteArray:
    """jax.make_array_from_process_local_data over the cluster: every
    process's trainer passes the part of the global array its host holds
    (`local_data`, shaped for this process) with the same `sharding` and
    `global_name`; the array commits, with one id cluster-wide, once every
    process holding devices of the sharding has contributed, and no bytes
    cross nodes. `global_shape` None: inferred as JAX does
    (local_to_global_shape). `sharding`: a NamedSharding (ours or JAX's).

    Errors are JAX's and the daemon's: InvalidArgumentError when the
    processes disagree (naming both), for JAX's shape errors ("Invalid host
    data, each dimension should match either global or process shape. ...",
    "Unable to compute global_shape due to non-uniform sharding. ..."),
    FailedPreconditionError when this process holds no device of the
    sharding, DeadlineExceededError naming the processes that did not arrive
    within `timeout` seconds (default 60); nothing is kept anywhere then.
    On a lone daemon: a plain upload (`global_shape`, if given, must be the
    local shape)."""
    header = process_local_proto(global_name, global_shape, timeout)
    c = resolve(client)
    s = as_sharding(sharding)
    rule = pb.PlacementRule()
    if isinstance(s, SingleDeviceSharding):
        rule.placement.CopyFrom(s.to_placement())
    else:
        rule.placement.CopyFrom(s.to_placement(c.mesh_id(s.mesh)))
    array = _dtypes.as_host_array(local_data)
    return RemoteArray(c, c.tensors.upload(array, rule, process_local=header))


def _process_mesh(c: Client) -> Mesh:
    """A mesh of each process's first device (axis "processes")."""
    firsts = {}
    for d in c.devices():
        firsts.setdefault(d.process_index, d)
    grid = np.empty(len(firsts), dtype=object)
    grid[:] = [firsts[p] for p in sorted(firsts)]
    return Mesh(grid, ("processes",))


def sync_global_devices(name: str, *, timeout: Optional[float] = None,
                        client: Optional[Client] = None) -> None:
    """jax.experimental.multihost_utils.sync_global_devices: returns once
    every process has called it with the same `name` (a multi-controller
    upload of one byte per process, deleted again). DeadlineExceededError
    naming the missing processes after `timeout` seconds (default 60)."""
    c = resolve(client)
    token = make_array_from_process_local_data(
        NamedSharding(_process_mesh(c), PartitionSpec()), np.zeros((1,), np.uint8),
        global_name=f"sync_global_devices/{name}", timeout=timeout, client=c)
    token.delete()


__all__ = ["Controller", "process_index", "process_count", "process_indices",
           "make_array_from_process_local_data", "sync_global_devices"]
