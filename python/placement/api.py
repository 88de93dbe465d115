"""jax-style top-level calls on the default client: devices(),
local_devices(), device_count(), local_device_count(), device_put(),
make_array_from_single_device_arrays(), delete()."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

from placement import _placing, _progress, _tree
from placement.array import RemoteArray, is_remote
from placement.client import Client, resolve
from placement.devices import Device
from placement.sharding import NamedSharding, SingleDeviceSharding, as_sharding


def devices(backend: Optional[str] = None, *, client: Optional[Client] = None) -> List[Device]:
    """The daemon's devices (jax.devices): in a cluster every node's, by
    global id; `backend` filters by platform."""
    return resolve(client).devices(backend)


def local_devices(process_index: Optional[int] = None, backend: Optional[str] = None, *,
                  client: Optional[Client] = None) -> List[Device]:
    """jax.local_devices: the devices of node `process_index` (None: the
    connected daemon's node)."""
    c = resolve(client)
    process = c.process_index if process_index is None else int(process_index)
    return [d for d in c.devices(backend) if d.process_index == process]


def device_count(backend: Optional[str] = None, *, client: Optional[Client] = None) -> int:
    """jax.device_count: devices of every node."""
    return len(resolve(client).devices(backend))


def local_device_count(backend: Optional[str] = None, *,
                       client: Optional[Client] = None) -> int:
    """jax.local_device_count: devices of the connected daemon's node."""
    return len(local_devices(backend=backend, client=client))


def device_put(x: Any, device: Any = None, *, client: Optional[Client] = None,
               progress: _progress.Progress = None) -> Any:
    """jax.device_put: a pytree onto a device or sharding (None: the first
    device). RemoteArray leaves move device to device. `progress`: a
    callable(done_bytes, total_bytes) told as the host leaves upload, or
    True for a tqdm bar (a plain one on a terminal without tqdm)."""
    c = resolve(client)
    target = device if device is not None else c.devices()[0]
    return _placing.place_tree(c, x, _placing.sharding_rule(c, target),
                               progress=_progress.reporter(progress, "device_put"))


def make_array_from_single_device_arrays(shape: Sequence[int], sharding: Any,
                                         arrays: Sequence[RemoteArray], *,
                                         donate: bool = False) -> RemoteArray:
    """jax.make_array_from_single_device_arrays over daemon tensors: one
    single-device RemoteArray per device of `sharding`, shaped like its shard
    (TensorService.Assemble). With `donate` the pieces become the shards
    without a copy and are gone afterwards."""
    if not arrays:
        raise ValueError("make_array_from_single_device_arrays needs at least one array")
    c = arrays[0].client
    s = as_sharding(sharding)
    placement = s.to_placement() if isinstance(s, SingleDeviceSharding) \
        else s.to_placement(c.mesh_id(s.mesh))
    info = c.tensors.assemble(list(shape), placement, [a.id for a in arrays], donate=donate)
    if donate:
        for a in arrays:
            a._consumed()
    return RemoteArray(c, info)


def lookup(id_or_name: str, *, client: Optional[Client] = None) -> RemoteArray:
    """A handle to a tensor the daemon already holds, by id or by its name
    when exactly one of the caller's tensors carries it (FailedPreconditionError
    listing the ids otherwise; NotFoundError for neither). The handle does not
    own the tensor: dropping it deletes nothing (delete() does)."""
    c = resolve(client)
    return RemoteArray(c, c.tensors.describe(id_or_name), owned=False)


def delete(tree: Any) -> None:
    """Deletes every RemoteArray leaf of a pytree."""
    for leaf in _tree.flatten(tree, is_leaf=is_remote)[0]:
        if isinstance(leaf, RemoteArray):
            leaf.delete()


__all__ = ["devices", "local_devices", "device_count", "local_device_count", "device_put",
           "make_array_from_single_device_arrays", "lookup", "delete", "NamedSharding"]
