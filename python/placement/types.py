"""What the daemon reports, as Python values (frozen dataclasses): the
public surface of the client speaks these, never protobuf messages.

    placement.default_client().status().uptime      # datetime.timedelta
    x.info.shards[0].index                           # (slice(0, 4), slice(None))
    it.stats.consumer_stall                          # datetime.timedelta

Durations are datetime.timedelta, times datetime.datetime (UTC), dtypes
numpy dtypes, shapes tuples, enum-like fields the daemon's lower-case
names ("formed", "alive", "upload"). Each type converts from its wire
message with `from_proto` (the client does that at the edge).
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np

from placement import _dtypes
from placement.v1 import types_pb2


def _timedelta(duration: Any) -> datetime.timedelta:
    return datetime.timedelta(seconds=duration.seconds, microseconds=duration.nanos // 1000)


def _datetime(timestamp: Any) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(timestamp.seconds + timestamp.nanos / 1e9,
                                           tz=datetime.timezone.utc)


def _enum_name(message: Any, field: str, prefix: str) -> str:
    """The lower-case name of enum field `field` of `message` without
    `prefix` ("CLUSTER_STATE_FORMED" -> "formed"); "unspecified" for a value
    this package does not know."""
    values = message.DESCRIPTOR.fields_by_name[field].enum_type.values_by_number
    value = getattr(message, field)
    return values[value].name[len(prefix):].lower() if value in values else "unspecified"


@dataclass(frozen=True)
class ShardInfo:
    """What one device holds of a tensor (JAX devices_indices_map):
    `index` is a tuple of slices into the global array (slice(None) for a
    whole dimension, as JAX writes it); `replica_id` counts earlier devices
    holding the same box; `process_index` is the node holding it."""

    device_id: int
    index: Tuple[slice, ...]
    shape: Tuple[int, ...]
    replica_id: int
    size_bytes: int
    process_index: int = 0

    @classmethod
    def from_proto(cls, s: Any, global_shape: Tuple[int, ...]) -> "ShardInfo":
        index = tuple(slice(None) if (r.begin, r.end) == (0, n) else slice(r.begin, r.end)
                      for r, n in zip(s.ranges, global_shape))
        return cls(device_id=int(s.device_id), index=index, shape=tuple(s.shape),
                   replica_id=int(s.replica_id), size_bytes=int(s.size_bytes),
                   process_index=int(s.process_index))


@dataclass(frozen=True)
class TensorInfo:
    """A daemon tensor's description (RemoteArray.info). `mesh_id` is the
    registered mesh of its sharding ("" for an implicit one: a single
    device, a replicate_across_devices set); `spec` the PartitionSpec
    entries (None, an axis name, or a tuple of names); `device_id` the
    device of a single-device placement, else None."""

    id: str
    name: str
    owner: str
    tenant: str
    dtype: np.dtype
    shape: Tuple[int, ...]
    mesh_id: str
    spec: Tuple[Any, ...]
    partial_axes: Tuple[str, ...]
    padded: bool
    device_id: Optional[int]
    shards: Tuple[ShardInfo, ...]
    size_bytes: int
    device_bytes: int

    @classmethod
    def from_proto(cls, t: Any) -> "TensorInfo":
        shape = tuple(int(d) for d in t.shape)
        spec = []
        for dim in t.sharding.spec.dims:
            axes = tuple(dim.axes)
            spec.append(None if not axes else axes[0] if len(axes) == 1 else axes)
        single = t.placement.WhichOneof("target") == "device_id"
        return cls(id=t.id, name=t.name, owner=t.owner, tenant=t.tenant,
                   dtype=_dtypes.from_proto(t.dtype), shape=shape, mesh_id=t.sharding.mesh_id,
                   spec=tuple(spec), partial_axes=tuple(t.sharding.partial_axes),
                   padded=t.sharding.mode == types_pb2.SHARDING_MODE_PADDED,
                   device_id=int(t.placement.device_id) if single else None,
                   shards=tuple(ShardInfo.from_proto(s, shape) for s in t.shards),
                   size_bytes=int(t.size_bytes), device_bytes=int(t.device_bytes))


@dataclass(frozen=True)
class ProcessStatus:
    """One daemon of a cluster as another sees it: `state` is "joining",
    "alive", "lost" (missed its heartbeats) or "left" (drained); its devices
    are [first_device_id, +num_devices);
    `joins` counts its restarts + 1."""

    process_index: int
    state: str
    peer_address: str
    num_devices: int
    first_device_id: int
    joins: int


@dataclass(frozen=True)
class ClusterStatus:
    """Membership as a daemon reports it (docs/cluster.md): `state` is
    "single" (a lone daemon), "forming", "formed", "degraded" or "failed"."""

    state: str
    epoch: int
    num_processes: int
    coordinator_address: str
    peer_address: str
    processes: Tuple[ProcessStatus, ...]


@dataclass(frozen=True)
class DaemonStatus:
    """DaemonService.GetStatus (Client.status())."""

    version: str
    backend: str
    backend_note: str
    instance_id: str
    uptime: datetime.timedelta
    start_time: datetime.datetime
    listen_address: str
    num_devices: int
    num_meshes: int
    num_tensors: int
    device_bytes_in_use: int
    serving: bool
    process_index: int
    num_prefetch_streams: int
    num_sessions: int
    num_session_tensors: int
    num_open_streams: int
    host_id: str
    boot_id: str
    region_socket: str
    num_regions: int
    cluster: ClusterStatus

    @classmethod
    def from_proto(cls, s: Any) -> "DaemonStatus":
        c = s.cluster
        cluster = ClusterStatus(
            state=_enum_name(c, "state", "CLUSTER_STATE_"), epoch=int(c.epoch),
            num_processes=int(c.num_processes), coordinator_address=c.coordinator_address,
            peer_address=c.peer_address,
            processes=tuple(ProcessStatus(
                process_index=int(p.process_index), state=_enum_name(p, "state", "PROCESS_STATE_"),
                peer_address=p.peer_address, num_devices=int(p.num_devices),
                first_device_id=int(p.first_device_id), joins=int(p.joins))
                for p in c.processes))
        return cls(version=s.version, backend=s.backend, backend_note=s.backend_note,
                   instance_id=s.instance_id, uptime=_timedelta(s.uptime),
                   start_time=_datetime(s.start_time), listen_address=s.listen_address,
                   num_devices=int(s.num_devices), num_meshes=int(s.num_meshes),
                   num_tensors=int(s.num_tensors), device_bytes_in_use=int(s.device_bytes_in_use),
                   serving=bool(s.serving), process_index=int(s.process_index),
                   num_prefetch_streams=int(s.num_prefetch_streams),
                   num_sessions=int(s.num_sessions),
                   num_session_tensors=int(s.num_session_tensors),
                   num_open_streams=int(s.num_open_streams), host_id=s.host_id,
                   boot_id=s.boot_id, region_socket=s.region_socket,
                   num_regions=int(s.num_regions), cluster=cluster)


@dataclass(frozen=True)
class StreamStatus:
    """An upload, download or prefetch stream open on the daemon
    (Client.streams(), what `placectl top` shows): `kind` is "upload",
    "upload_batch", "download" or "prefetch"; `total_bytes` 0 when not
    known."""

    id: int
    kind: str
    tenant: str
    what: str
    bytes: int
    total_bytes: int
    opened: datetime.datetime

    @classmethod
    def from_proto(cls, s: Any) -> "StreamStatus":
        return cls(id=int(s.id), kind=_enum_name(s, "kind", "STREAM_KIND_"), tenant=s.tenant, what=s.what, bytes=int(s.bytes),
                   total_bytes=int(s.total_bytes), opened=_datetime(s.opened))


@dataclass(frozen=True)
class MemoryTrim:
    """What Client.trim_memory() gave back: the cached device bytes freed
    and the daemon's resident memory before and after."""

    cache_bytes_released: int
    resident_bytes_before: int
    resident_bytes_after: int

    @classmethod
    def from_proto(cls, r: Any) -> "MemoryTrim":
        return cls(cache_bytes_released=int(r.cache_bytes_released),
                   resident_bytes_before=int(r.resident_bytes_before),
                   resident_bytes_after=int(r.resident_bytes_after))


@dataclass(frozen=True)
class PrefetchStats:
    """The daemon's figures for a finished prefetch stream: batches and
    device bytes staged, the time its consumer waited for a ready batch,
    the time the daemon waited for a free slot, and the most batches held
    at once."""

    batches_staged: int
    bytes_staged: int
    consumer_stall: datetime.timedelta
    producer_blocked: datetime.timedelta
    max_batches_held: int

    @classmethod
    def from_proto(cls, s: Any) -> "PrefetchStats":
        return cls(batches_staged=int(s.batches_staged), bytes_staged=int(s.bytes_staged),
                   consumer_stall=_timedelta(s.consumer_stall),
                   producer_blocked=_timedelta(s.producer_blocked),
                   max_batches_held=int(s.max_batches_held))


@dataclass(frozen=True)
class RegionInfo:
    """A registered shared-memory region (docs/api/regions.md)."""

    id: str
    name: str
    size_bytes: int
    session_id: str
    tenant: str
    pinned: bool

    @classmethod
    def from_proto(cls, r: Any) -> "RegionInfo":
        return cls(id=r.region_id, name=r.name, size_bytes=int(r.size_bytes),
                   session_id=r.session_id, tenant=r.tenant, pinned=bool(r.pinned))


__all__ = ["ShardInfo", "TensorInfo", "ProcessStatus", "ClusterStatus", "DaemonStatus",
           "StreamStatus", "MemoryTrim", "PrefetchStats", "RegionInfo"]
