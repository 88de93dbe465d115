"""Collectives on daemon tensors over mesh axes (CollectiveService): JAX's
psum / pmean / all_gather / psum_scatter and a broadcast, run by the
daemons. Inputs and results are RemoteArrays; no bytes reach this process.

    total = placement.collectives.all_reduce(x, "sum", axes=("data",))
    full = placement.collectives.all_gather(x, dim=0)

Axes: None means every mesh axis for all_reduce and broadcast, the axes
sharding `dim` for all_gather, and the partial axes for reduce_scatter. Ops
are the seed's names ("sum", "mean", "max", "min", "prod"); the daemon
answers others with InvalidArgumentError "Unsupported reduce_type: ...". `donate=True` runs in
place (the input is gone afterwards). Errors keep the daemon's code and
text (docs/api/collectives.md).

`controller` (placement.Controller, or "single" / "multi") matters for
tensors whose shards live on several daemons (placement.cluster): "single"
(the default) lets this call drive every daemon; "multi" is JAX's
multi-controller model -- every process's trainer makes the same call with
the same arguments on its own daemon, the calls meet and run once, and each
returns the same tensor. A multi call waits for the others up to the
daemon's --cluster_op_timeout and its own deadline (`timeout` seconds, else
the client's): give it room for the slowest process. Collectives are never
retried.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from placement import _tree, errors
from placement.array import RemoteArray, is_remote
from placement.client import Client
from placement.cluster import Controller
from placement.devices import device_id
from placement.v1 import collective_service_pb2 as cpb
from placement.v1 import tensor_service_pb2 as tpb

Axes = Union[None, str, Sequence[str]]

#: The reductions, by the seed's names, in wire-value order (common/reduce_op.h
#: is the one table; tests/python/placement/test_tables.py checks this copy).
REDUCE_OPS = ("sum", "mean", "max", "min", "prod")


def _axes(axes: Axes) -> list:
    if axes is None:
        return []
    return [axes] if isinstance(axes, str) else list(axes)


def _source(donate: bool) -> int:
    return tpb.SOURCE_HANDLING_DONATE if donate else tpb.SOURCE_HANDLING_KEEP


def _remote(x: Any, what: str) -> RemoteArray:
    if not is_remote(x):
        raise errors.InvalidArgumentError(
            f"{what}: expected a daemon tensor (RemoteArray), got {type(x).__name__}")
    return x


def _call(x: RemoteArray, method: str, request: Any, donate: bool,
          timeout: Optional[float]) -> RemoteArray:
    c: Client = x.client
    response = c.unary(getattr(c.collective_stub, method), request, idempotent=False,
                       timeout=timeout)
    if donate:
        x._consumed()
    return RemoteArray(c, response.tensor)


def all_reduce(x: RemoteArray, op: str = "sum", axes: Axes = None, *,
               controller: Union[None, str, Controller] = None, donate: bool = False,
               name: str = "", timeout: Optional[float] = None) -> RemoteArray:
    """x partial over `axes`, or dimension 0 sharded over them (one block
    per device): the reduction, replicated over `axes`."""
    x = _remote(x, "all_reduce")
    request = cpb.AllReduceRequest(tensor_id=x.id, axes=_axes(axes), op_name=op,
                                   source=_source(donate), name=name,
                                   controller=Controller.to_proto(controller))
    return _call(x, "AllReduce", request, donate, timeout)


def all_reduce_tree(tree: Any, op: str = "sum", axes: Axes = None, *,
                    controller: Union[None, str, Controller] = None, donate: bool = False,
                    timeout: Optional[float] = None, client: Optional[Client] = None) -> Any:
    """all_reduce of every RemoteArray leaf of a pytree, fused per mesh and
    dtype (AllReduceBatch); the result has the input's structure. `client`:
    the daemon to ask (default: the leaves' own)."""
    leaves, treedef, keys = _tree.flatten(tree, is_leaf=is_remote)
    if not leaves:
        return tree
    for key, leaf in zip(keys, leaves):
        _remote(leaf, f"all_reduce_tree: {key}")
    c: Client = client if client is not None else leaves[0].client
    groups: dict = {}
    for i, leaf in enumerate(leaves):
        groups.setdefault((leaf._info.sharding.mesh_id, leaf._info.dtype), []).append(i)
    results: list = [None] * len(leaves)
    made: list = []
    try:
        for indices in groups.values():
            request = cpb.AllReduceBatchRequest(
                tensor_ids=[leaves[i].id for i in indices], axes=_axes(axes), op_name=op,
                source=_source(donate), controller=Controller.to_proto(controller))
            response = c.unary(c.collective_stub.AllReduceBatch, request, idempotent=False,
                               timeout=timeout)
            for i, info in zip(indices, response.tensors):
                if donate:
                    leaves[i]._consumed()
                results[i] = RemoteArray(c, info)
                made.append(results[i])
    except BaseException:
        for r in made:
            r.delete()
        raise
    return _tree.unflatten(treedef, results)


def all_gather(x: RemoteArray, dim: int = 0, axes: Axes = None, *,
               controller: Union[None, str, Controller] = None, donate: bool = False,
               name: str = "", timeout: Optional[float] = None) -> RemoteArray:
    """Dimension `dim` sharded over `axes` -> replicated over them (tiled)."""
    x = _remote(x, "all_gather")
    request = cpb.AllGatherRequest(tensor_id=x.id, axes=_axes(axes), dim=int(dim),
                                   source=_source(donate), name=name,
                                   controller=Controller.to_proto(controller))
    return _call(x, "AllGather", request, donate, timeout)


def reduce_scatter(x: RemoteArray, op: str = "sum", scatter_dim: int = 0, axes: Axes = None,
                   *, controller: Union[None, str, Controller] = None, donate: bool = False,
                   name: str = "", timeout: Optional[float] = None) -> RemoteArray:
    """x partial over `axes` -> reduced and sharded along `scatter_dim`
    over them (psum_scatter)."""
    x = _remote(x, "reduce_scatter")
    request = cpb.ReduceScatterRequest(tensor_id=x.id, axes=_axes(axes), op_name=op,
                                       scatter_dim=int(scatter_dim), source=_source(donate),
                                       name=name, controller=Controller.to_proto(controller))
    return _call(x, "ReduceScatter", request, donate, timeout)


def broadcast(x: RemoteArray, root_device: Any, axes: Axes = None, *,
              controller: Union[None, str, Controller] = None, donate: bool = False,
              name: str = "", timeout: Optional[float] = None) -> RemoteArray:
    """The shard on `root_device` (a Device, id or JAX device) copied to
    every device of its group over `axes`."""
    x = _remote(x, "broadcast")
    request = cpb.BroadcastRequest(tensor_id=x.id, root_device_id=device_id(root_device),
                                   axes=_axes(axes), source=_source(donate), name=name,
                                   controller=Controller.to_proto(controller))
    return _call(x, "Broadcast", request, donate, timeout)


__all__ = ["all_reduce", "all_reduce_tree", "all_gather", "reduce_scatter", "broadcast"]
