"""The JAX bridge (needs JAX): RemoteArray <-> jax.Array, shard by shard.

    x = placement.to_jax(remote)      # jax.Array, same NamedSharding, local JAX devices
    r = placement.from_jax(x)         # RemoteArray, same sharding, daemon devices

Device correspondence (placement._jax_devices): JAX device -> daemon device
id `process_index * 1024 + k`, where k is the device's position among that
process's JAX devices (ordered by id) -- the daemon's own numbering, so
JAX's 8 forced CPU devices are daemon devices 0..7. set_device_map()
replaces the rule (a callable from a JAX device to a daemon id).

to_jax downloads each distinct shard once (a replicated box is fetched once
and put on every device holding it) and builds the array with
jax.make_array_from_single_device_arrays. from_jax uploads each addressable
shard to its device and assembles them on the daemon
(TensorService.Assemble, donating the pieces: no second copy).
Partial or padded daemon shardings have no JAX equivalent: InvalidArgumentError.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from placement import errors
from placement._jax_devices import _jax, daemon_device_id, jax_device, set_device_map
from placement.array import RemoteArray
from placement.client import Client, resolve
from placement.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

def _jax_sharding(sharding: Any) -> Any:
    jax = _jax()
    if isinstance(sharding, SingleDeviceSharding):
        return jax.sharding.SingleDeviceSharding(jax_device(sharding.device_id))
    assert isinstance(sharding, NamedSharding)
    if sharding.partial_axes:
        raise errors.InvalidArgumentError(
            f"{sharding!r} has partial axes {sharding.partial_axes}; a jax.Array cannot hold "
            f"unreduced contributions (reduce them first)")
    if sharding.padded:
        raise errors.InvalidArgumentError(f"{sharding!r} is padded; JAX shardings are even")
    ids = sharding.mesh.device_ids
    grid = np.empty(ids.shape, dtype=object)
    for index, i in np.ndenumerate(ids):
        grid[index] = jax_device(int(i))
    types = sharding.mesh.axis_types
    if types is None:
        mesh = jax.sharding.Mesh(grid, sharding.mesh.axis_names)
    else:  # the axis types the mesh had in JAX (Explicit for jax.make_mesh)
        axis_type = jax.sharding.AxisType
        mesh = jax.sharding.Mesh(grid, sharding.mesh.axis_names,
                                 axis_types=tuple(getattr(axis_type, t.capitalize())
                                                  for t in types))
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*sharding.spec))


def to_jax(remote: RemoteArray) -> Any:
    """A jax.Array with the same sharding on the matching local JAX devices.
    Against a daemon on this host the shards come from a view of its memory
    (placement.views) and nothing copies but JAX's own device_put of each
    shard -- none on JAX's CPU backend, which aliases a read-only aligned
    array (the export then lives as long as the jax.Array); elsewhere each
    distinct box is downloaded first."""
    jax = _jax()
    target = _jax_sharding(remote.sharding)
    boxes: Dict[Tuple[Tuple[int, int], ...], np.ndarray] = {}
    view = remote._view()
    if view is not None:
        for s in view.shards:
            if s.data is not None:
                info = remote._info.shards[s.shard_index]
                boxes.setdefault(tuple((r.begin, r.end) for r in info.ranges), s.data)
        view.close()  # the export ends with the last of these arrays
    pieces = []
    for shard in remote._info.shards:
        box = tuple((r.begin, r.end) for r in shard.ranges)
        if box not in boxes:
            boxes[box] = remote.client.tensors.download(remote.id, device_id=shard.device_id,
                                                         info=remote._info)[1]
        pieces.append(jax.device_put(boxes[box], jax_device(shard.device_id)))
    return jax.make_array_from_single_device_arrays(remote.shape, target, pieces)


def _our_sharding(sharding: Any) -> Any:
    jax = _jax()
    if isinstance(sharding, jax.sharding.NamedSharding):
        ids = np.asarray(sharding.mesh.devices)
        grid = np.empty(ids.shape, dtype=object)
        for index, d in np.ndenumerate(ids):
            grid[index] = daemon_device_id(d)
        return NamedSharding(Mesh(grid, tuple(sharding.mesh.axis_names),
                                  getattr(sharding.mesh, "axis_types", None)),
                             PartitionSpec(*sharding.spec))
    if len(sharding.device_set) == 1:
        return SingleDeviceSharding(daemon_device_id(next(iter(sharding.device_set))))
    raise errors.InvalidArgumentError(
        f"from_jax: {type(sharding).__name__} is not supported; give the array a NamedSharding "
        f"(jax.device_put(x, NamedSharding(mesh, spec)))")


def from_jax(x: Any, *, client: Optional[Client] = None, name: str = "") -> RemoteArray:
    """Uploads each addressable shard of `x` to the matching daemon device and
    assembles them into one daemon tensor with the same sharding."""
    c = resolve(client)
    sharding = _our_sharding(x.sharding)
    if isinstance(sharding, SingleDeviceSharding):
        rule = _device_rule(sharding.device_id)
        return RemoteArray(c, c.tensors.upload(np.asarray(x), rule, name=name))
    pieces: List[RemoteArray] = []
    try:
        for shard in x.addressable_shards:
            info = c.tensors.upload(np.asarray(shard.data),
                                    _device_rule(daemon_device_id(shard.device)))
            pieces.append(RemoteArray(c, info))
        placement = sharding.to_placement(c.mesh_id(sharding.mesh))
        info = c.tensors.assemble(x.shape, placement, [p.id for p in pieces], donate=True,
                                  name=name)
    except BaseException:
        for p in pieces:
            p.delete()
        raise
    for p in pieces:  # donated: the daemon already removed them
        p._consumed()
    return RemoteArray(c, info)


def _device_rule(device_id: int) -> Any:
    from placement._placing import device_rule
    return device_rule(device_id)
