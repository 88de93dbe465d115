"""The JAX bridge (needs JAX): RemoteArray <-> jax.Array, shard by shard.

    x = placement.to_jax(remote)      # jax.Array, same NamedSharding, local JAX devices
    r = placement.from_jax(x)         # RemoteArray, same sharding, daemon devices

Device correspondence: JAX device -> daemon device id
`process_index * 1024 + k`, where k is the device's position among that
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
from placement.array import RemoteArray
from placement.client import Client, resolve
from placement.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

_device_map: Optional[Callable[[Any], int]] = None
_ids: Optional[Dict[Any, int]] = None


def _jax() -> Any:
    try:
        import jax
    except ImportError:
        raise ImportError("placement's JAX bridge needs JAX: pip install 'placement[jax]'") \
            from None
    return jax


def set_device_map(fn: Optional[Callable[[Any], int]]) -> None:
    """Maps JAX devices to daemon device ids with `fn` (None: the default rule)."""
    global _device_map, _ids
    _device_map = fn
    _ids = None


def _id_table() -> Dict[Any, int]:
    global _ids
    if _ids is None:
        jax = _jax()
        table: Dict[Any, int] = {}
        by_process: Dict[int, List[Any]] = {}
        for d in jax.devices():
            by_process.setdefault(d.process_index, []).append(d)
        for process, devices in by_process.items():
            for k, d in enumerate(sorted(devices, key=lambda d: d.id)):
                table[d] = process * 1024 + k
        _ids = table
    return _ids


def daemon_device_id(jax_device: Any) -> int:
    """The daemon device id of a JAX device."""
    if _device_map is not None:
        return int(_device_map(jax_device))
    found = _id_table().get(jax_device)
    if found is None:
        raise errors.InvalidArgumentError(f"JAX device {jax_device!r} is not a device of "
                                          f"this JAX process")
    return found


def jax_device(daemon_id: int) -> Any:
    """The local JAX device holding daemon device `daemon_id`."""
    jax = _jax()
    for d in jax.local_devices():
        if daemon_device_id(d) == daemon_id:
            return d
    raise errors.NotFoundError(
        f"no local JAX device corresponds to daemon device {daemon_id}; JAX has "
        f"{jax.local_device_count()} local devices (for CPU devices, set "
        f"XLA_FLAGS=--xla_force_host_platform_device_count=N)")


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
    mesh = jax.sharding.Mesh(grid, sharding.mesh.axis_names)
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*sharding.spec))


def to_jax(remote: RemoteArray) -> Any:
    """A jax.Array with the same sharding on the matching local JAX devices."""
    jax = _jax()
    target = _jax_sharding(remote.sharding)
    boxes: Dict[Tuple[Tuple[int, int], ...], np.ndarray] = {}
    pieces = []
    for shard in remote.info.shards:
        box = tuple((r.begin, r.end) for r in shard.ranges)
        if box not in boxes:
            boxes[box] = remote.client.tensors.download(remote.id, device_id=shard.device_id,
                                                         info=remote.info)[1]
        pieces.append(jax.device_put(boxes[box], jax_device(shard.device_id)))
    return jax.make_array_from_single_device_arrays(remote.shape, target, pieces)


def _our_sharding(sharding: Any) -> Any:
    jax = _jax()
    if isinstance(sharding, jax.sharding.NamedSharding):
        ids = np.asarray(sharding.mesh.devices)
        grid = np.empty(ids.shape, dtype=object)
        for index, d in np.ndenumerate(ids):
            grid[index] = daemon_device_id(d)
        return NamedSharding(Mesh(grid, tuple(sharding.mesh.axis_names)),
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
        p.keep()
    return RemoteArray(c, info)


def _device_rule(device_id: int) -> Any:
    from placement._placing import device_rule
    return device_rule(device_id)
