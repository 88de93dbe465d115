"""Same-host shared-memory regions (placement.v1.RegionService,
docs/api/regions.md): memory this process shares with a daemon on the same
machine, so tensor bytes move at memory speed instead of through gRPC.

Transfers use regions by themselves when the daemon is on this host
(TransportOptions.transfer_path "auto": the Client's pooled staging regions,
one copy on this side). SharedRegion is for callers who want to fill or read
the shared memory in place, with no copy on this side at all:

    with placement.SharedRegion(64 << 20) as region:
        x = region.ndarray(np.float32, (1024, 16384))  # fill x in place
        r = placement.device_put(x, sharding)           # the daemon reads the region
        y = region.ndarray(np.float32, (1024, 16384), offset=x.nbytes)
        r.to_numpy(out=y)                               # the daemon writes into it

Any array that lies inside a live SharedRegion of the client (a view from
`ndarray()`, or a slice of one) travels as a region slice, whatever its size.

A SharedRegion belongs to the client that made it; its memory may be used
from any thread, and the caller orders its own accesses against the
transfers it starts. close() (also `with`, and the client's close())
unregisters it -- the daemon first finishes the transfers using it -- and
unmaps it here once no numpy view of it is left.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from placement import _placing
from placement._shared_region import (MAX_NAME_BYTES, SharedRegion, register_fd,
                                      same_host_socket, unregister)
from placement.array import RemoteArray
from placement.client import Client, resolve
from placement.types import RegionInfo
from placement.v1 import region_service_pb2 as rpb


def same_host(client: Optional[Client] = None) -> bool:
    """Whether regions can reach the daemon: its GetStatus host_id and
    boot_id equal this machine's, it reports a region socket, and the target
    is a unix socket or a loopback address. GetStatus errors are raised."""
    return same_host_socket(resolve(client)) is not None


def list_regions(client: Optional[Client] = None) -> List[RegionInfo]:
    """The caller's registered regions (an admin's: all), sorted by id."""
    c = resolve(client)
    return [RegionInfo.from_proto(r)
            for r in c.unary(c.region_stub.ListRegions, rpb.ListRegionsRequest(),
                             idempotent=True).regions]


def upload_from_region(region: SharedRegion, offset: int, dtype: Any, shape: Sequence[int],
                       device: Any = None, *, name: str = "") -> RemoteArray:
    """A RemoteArray of `dtype` and `shape` whose bytes the daemon reads
    from `region` at `offset` (no copy on this side), placed on `device`
    (a device, id or sharding, as device_put takes; None: the first)."""
    c = region.client
    target = device if device is not None else c.devices()[0]
    info = c.tensors.upload_from_region(region, offset, np.dtype(dtype), tuple(shape),
                                        _placing.sharding_rule(c, target), name=name)
    return RemoteArray(c, info)


def download_to_region(array: RemoteArray, region: SharedRegion, offset: int = 0) -> np.ndarray:
    """Downloads the whole of RemoteArray `array` into `region` at `offset`
    (the daemon writes it there; no copy on this side) and returns the numpy
    view of those bytes. OutOfRangeError when it does not fit."""
    out = region.ndarray(array.dtype, array.shape, offset)
    array.to_numpy(out=out)
    return out


__all__ = ["SharedRegion", "RegionInfo", "same_host", "list_regions", "register_fd", "unregister",
           "upload_from_region", "download_to_region", "MAX_NAME_BYTES"]
