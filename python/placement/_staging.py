"""Where the bytes of an upload, batch or prefetch batch come from when they
take the region path (docs/api/regions.md): arrays already inside one of
the caller's SharedRegions are named where they lie (no copy); the others
are copied once into a staging region leased from the Client's RegionPool,
one after another, and named there. The C++ client's StageBatchArrays
(client/src/tensors_region.cc).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from placement import errors
from placement._region_pool import Lease, RegionPool, parallel_copy
from placement._transport import TransferPath
from placement._shared_region import SharedRegion
from placement.v1 import region_service_pb2 as rpb
from placement.v1 import types_pb2


def as_bytes(array: np.ndarray) -> np.ndarray:
    """The bytes of a C-contiguous array as a uint8 array (no copy)."""
    return array.reshape(-1).view(np.uint8)


def region_slice(region: SharedRegion, offset: int, size: int) -> rpb.RegionSlice:
    return rpb.RegionSlice(region_id=region.id, offset=offset, size=size)


class Staged:
    """The region slices of a group of arrays (by index; arrays missing here
    go as stream chunks) and the staging lease holding some of them, which
    the caller releases once the daemon has read them."""

    def __init__(self) -> None:
        self.slices: Dict[int, rpb.RegionSlice] = {}
        self.lease: Optional[Lease] = None

    def release(self) -> None:
        if self.lease is not None:
            self.lease.release()
            self.lease = None

    def names_staging(self, error: BaseException) -> bool:
        """Whether `error` is a NOT_FOUND naming the staging region."""
        region = self.lease.region if self.lease is not None else None
        return (isinstance(error, errors.NotFoundError) and region is not None
                and region.id in error.message)

    def finish(self, error: Optional[BaseException]) -> None:
        """Releases the lease after a transfer that ended with `error` (None:
        OK). After NOT_FOUND the staging region may be what the daemon no
        longer knows (its session ended, someone unregistered it): it is
        dropped rather than handed to the next transfer."""
        if isinstance(error, errors.NotFoundError) and self.lease is not None:
            self.lease.discard()
            self.lease = None
        self.release()


def stage(pool: RegionPool, path: TransferPath, arrays: Sequence[np.ndarray], *,
          locate: bool = True) -> Staged:
    """Slices for `arrays` under `path`: located in the caller's regions
    (with `locate`), or copied into one staging region when the rest take
    the region path (use_region on their total). Empty arrays need none."""
    staged = Staged()
    if path is TransferPath.STREAM:
        return staged
    rest: List[int] = []
    for i, a in enumerate(arrays):
        if a.nbytes == 0:
            continue
        found = pool.locate(a) if locate else None
        if found is not None:
            staged.slices[i] = region_slice(found[0], found[1], a.nbytes)
        else:
            rest.append(i)
    total = sum(arrays[i].nbytes for i in rest)
    lease = pool.lease_for(path, total)  # also when total is 0: a forced region checks the host
    if lease is None:
        return staged
    staged.lease = lease
    region = lease.region
    assert region is not None
    offset = 0
    for i in rest:
        n = arrays[i].nbytes
        parallel_copy(region.bytes[offset:offset + n], as_bytes(arrays[i]))
        staged.slices[i] = region_slice(region, offset, n)
        offset += n
    return staged


def download_room(info: types_pb2.TensorInfo, dtype: np.dtype, device_id: Optional[int],
                  process_index: Optional[int]) -> int:
    """Bytes a download selection of tensor `info` can return: the array;
    one device's shard; a node's part (at most every shard's bytes)."""
    if device_id is not None:
        for shard in info.shards:
            if shard.device_id == device_id:
                return int(np.prod(tuple(shard.shape), dtype=np.int64)) * dtype.itemsize
        return int(info.size_bytes)  # the daemon reports the unknown device
    if process_index is not None:
        return int(max(info.size_bytes, info.device_bytes))
    return int(info.size_bytes)
