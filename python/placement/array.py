"""RemoteArray: a handle to a tensor held by the daemon (the counterpart of
a jax.Array whose buffers live in placementd).

Metadata (shape, dtype, sharding, shards) comes with the handle; bytes move
only when asked: x.to_numpy() downloads the whole array into a new (or
given) array, shard.data one device's shard. Against a daemon on this host,
np.asarray(x) and shard.data are read-only zero-copy views of the daemon's
memory instead (placement.views; arrays of 256 KiB and more; a sharded array
is assembled from its shard views: one copy here, no transfer); elsewhere,
and with transfer_path='stream', they download. Lifetime: x.delete() frees the device memory
at once; `with x:` deletes on exit; an owned handle that is garbage-collected
is deleted by its client's background thread; x.keep() hands the tensor to
the daemon for good (it then outlives this process). Handles of prefetched
batches are not owned: the stream releases them.

Thread-safe for reads; delete() may be called once from any thread.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import numpy as np

from placement import _dtypes, _progress, errors
from placement.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding
from placement.types import TensorInfo
from placement.v1 import types_pb2


@dataclass(frozen=True)
class Shard:
    """One device's piece (jax.Shard): `index` is a tuple of slices into the
    global array (slice(None) for a whole dimension, as JAX writes it);
    `data` downloads the piece as a numpy array."""

    device: Any
    index: Tuple[slice, ...]
    replica_id: int
    array: "RemoteArray"
    shape: Tuple[int, ...]
    position: int = -1  # into the tensor's shards

    @property
    def data(self) -> np.ndarray:
        """The shard's bytes: a read-only view of the daemon's memory when it
        is on this host (placement.views), else a download."""
        held = self.array._held_view
        if held is not None and self.position >= 0:
            for s in held.shards:
                if s.shard_index == self.position and s.data is not None:
                    return s.data
        if self.position >= 0:
            view = self.array._view([self.position])
            if view is not None:
                data = view.shards[0].data
                view.close()  # the export lives while `data` does
                if data is not None:
                    return data
        return self.array._download(device_id=self.device_id)

    @property
    def device_id(self) -> int:
        return self.device.id if hasattr(self.device, "id") else int(self.device)



class RemoteArray:
    """See module docstring."""

    def __init__(self, client: Any, info: types_pb2.TensorInfo, *, owned: bool = True):
        # `client` is a placement.Client; `info` the daemon's message (the
        # package's modules read it as `_info`; callers get `info`).
        self._client = client
        self._info = info
        self._owned = owned
        self._deleted = False
        self._viewable = True  # False for prefetched batches (their stream releases them)
        # A view batch's view, opened with the batch (prefetch views=True):
        # np.asarray and shard data read through it, with no call.
        self._held_view: Any = None
        self._sharding: Any = None
        self._finalizer: Optional[weakref.finalize] = None
        if owned:
            self._finalizer = weakref.finalize(self, client.release_later, info.id)
            self._finalizer.atexit = False
            client.track(info.id, self)

    # --- Metadata -------------------------------------------------------------
    @property
    def id(self) -> str:
        return self._info.id

    @property
    def name(self) -> str:
        return self._info.name

    @property
    def info(self) -> TensorInfo:
        """The daemon's description: dtype, shape, sharding, shards (with
        their index slices, devices, replica ids and bytes), owner, tenant."""
        return TensorInfo.from_proto(self._info)

    @property
    def client(self) -> Any:
        """The placement.Client that holds the handle."""
        return self._client

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self._info.shape)

    @property
    def dtype(self) -> np.dtype:
        return _dtypes.from_proto(self._info.dtype)

    @property
    def ndim(self) -> int:
        return len(self._info.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self._info.size_bytes

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    @property
    def sharding(self) -> Any:
        """NamedSharding (registered or implicit mesh) or SingleDeviceSharding."""
        if self._sharding is None:
            self._sharding = self._resolve_sharding()
        return self._sharding

    def _device(self, device_id: int) -> Any:
        for d in self._client.devices():
            if d.id == device_id:
                return d
        return device_id

    def _resolve_sharding(self) -> Any:
        info = self._info
        if info.placement.WhichOneof("target") == "device_id":
            return SingleDeviceSharding(self._device(info.placement.device_id))
        s = info.sharding
        if s.mesh_id:
            mesh = self._client.mesh(s.mesh_id)
        else:  # an implicit mesh: replicate_across_devices(devices=...)
            ids: List[int] = []
            for shard in info.shards:
                if shard.device_id not in ids:
                    ids.append(shard.device_id)
            grid = np.empty(len(ids), dtype=object)
            grid[:] = [self._device(i) for i in ids]
            mesh = Mesh(grid, ("replica",))
        op = None
        if s.partial_axes:
            op = types_pb2.ReduceOp.Name(s.partial_op or types_pb2.REDUCE_OP_SUM)
            op = op.replace("REDUCE_OP_", "").lower()
        return NamedSharding(mesh, PartitionSpec.from_proto(s.spec),
                             partial_axes=tuple(s.partial_axes), partial_op=op,
                             padded=s.mode == types_pb2.SHARDING_MODE_PADDED)

    def _shards(self, addressable: bool) -> List[Shard]:
        dims = self.shape
        shards = list(enumerate(self._info.shards))
        if addressable and self._client.process_count > 1:
            process = self._client.process_index
            shards = [(i, s) for i, s in shards if s.process_index == process]
        # A shard of another node (position -1) is never viewed from here.
        local = self._client.process_count <= 1
        return [Shard(self._device(s.device_id),
                      tuple(slice(None) if (r.begin, r.end) == (0, n) else slice(r.begin, r.end)
                            for r, n in zip(s.ranges, dims)),
                      s.replica_id, self, tuple(s.shape),
                      i if local or s.process_index == self._client.process_index else -1)
                for i, s in shards]

    @property
    def addressable_shards(self) -> List[Shard]:
        """The shards on the devices of the client's daemon (JAX: this
        process's), in mesh order, replicas included. On a lone daemon every
        shard; in a cluster only the connected node's."""
        return self._shards(addressable=True)

    @property
    def global_shards(self) -> List[Shard]:
        """Every shard, on every node, in mesh order. `shard.data` works for
        each (the daemon fetches a remote node's shard)."""
        return self._shards(addressable=False)

    @property
    def is_fully_addressable(self) -> bool:
        """True when every shard is on the client's daemon (always on a lone
        daemon)."""
        if self._client.process_count <= 1:
            return True
        process = self._client.process_index
        return all(s.process_index == process for s in self._info.shards)

    def devices(self) -> set:
        """Every device holding a shard, on every node (jax.Array.devices)."""
        return {s.device for s in self.global_shards}

    def is_fully_replicated(self) -> bool:
        return bool(self.sharding.is_fully_replicated)

    # --- Bytes ----------------------------------------------------------------
    def _check_alive(self) -> None:
        if self._deleted:
            raise errors.FailedPreconditionError(f"RemoteArray {self.id} was deleted")

    def _download(self, out: Optional[np.ndarray] = None, progress: Any = None,
                  **selection: Any) -> np.ndarray:
        self._check_alive()
        return self._client.tensors.download(self.id, info=self._info, out=out,
                                             progress=progress, **selection)[1]

    def _view(self, shard_indices: Optional[List[int]] = None) -> Any:
        """A TensorView of this array's shards when the daemon shares this host
        and a view pays (256 KiB and more, transfer_path not 'stream'), else
        None: the caller downloads. An export the daemon refuses for a bound
        (--tenant_max_exports) or a platform that has none also means None."""
        from placement import views, _region_pool

        self._check_alive()
        path = self._client.regions.path()
        if (not self._viewable or path is _region_pool.TransferPath.STREAM
                or self.nbytes < _region_pool.AUTO_MIN_BYTES):
            return None
        try:
            if self._client.regions.same_host_socket() is None:
                return None
            return views.TensorView(self._client, self.id, shard_indices)
        except (errors.FailedPreconditionError, errors.UnimplementedError,
                errors.ResourceExhaustedError, errors.UnavailableError):
            return None

    def to_numpy(self, out: Optional[np.ndarray] = None, *, progress: Any = None) -> np.ndarray:
        """Downloads the whole array (the daemon gathers the replica-0 shards)
        into a new array, or into `out` (writable, C-contiguous, this dtype
        and shape), which is returned. Against a same-host daemon holding
        every shard, 1 MiB or more is read in place: each distinct box
        copied once straight out of the daemon's memory
        (placement._inplace_read). An `out` inside one of the client's
        SharedRegions (placement.regions) is written by the daemon itself.
        `progress`: a callable(done_bytes, total_bytes), or True for a tqdm
        bar (placement.device_put's)."""
        return self._download(out, _progress.reporter(progress, "download"))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = None
        if copy is not True and self._held_view is not None:
            try:
                out = self._held_view.assemble()  # a lone whole shard: the view itself
            except errors.FailedPreconditionError:
                out = None
        elif copy is not True:
            view = self._view()
            if view is not None:
                try:
                    out = view.assemble()  # a lone whole shard: the view itself
                except errors.FailedPreconditionError:
                    out = None  # shards elsewhere (a cluster), a partial tensor
                finally:
                    view.close()  # the export lives while `out` maps it
        if out is None:
            out = self.to_numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        """DLPack export of the whole array as np.asarray makes it
        (np.from_dlpack, jax.dlpack.from_dlpack, torch.from_dlpack): against a
        same-host daemon a read-only view of the daemon's memory -- for a lone
        whole shard the shard itself, no copy -- else a download. Read-only
        memory needs DLPack 1.0's read-only flag: a consumer that asks for an
        older version (no max_version, e.g. JAX 0.10) gets a private copy, or
        BufferError with copy=False."""
        host = np.asarray(self)
        kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version),
                                    ("dl_device", dl_device), ("copy", copy)) if v is not None}
        if not host.flags.writeable and (max_version is None or tuple(max_version) < (1, 0)):
            if copy is False:
                raise BufferError(
                    f"RemoteArray {self.id} is a read-only view of the daemon's memory, which "
                    f"DLPack before 1.0 cannot mark read-only; call with copy=None or True for "
                    f"a copy, or with max_version=(1, 0)")
            host = np.array(host)  # a consumer that may write gets its own bytes
            kwargs.pop("copy", None)
        return host.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(kDLCPU, 0): __dlpack__ exports host memory (a CUDA daemon's
        shards are downloaded; use placement.views' IPC handles for them)."""
        return (1, 0)

    def block_until_ready(self) -> "RemoteArray":
        return self  # the daemon answers once the bytes are on their devices

    # --- Lifetime -------------------------------------------------------------
    def delete(self) -> None:
        """Frees the device memory now. A second call, or a tensor the daemon
        already dropped (a released prefetch batch), does nothing."""
        if self._deleted:
            return
        self._deleted = True
        if self._finalizer is not None:
            self._finalizer.detach()
        self._client.untrack(self.id)
        self._client.delete_tensors([self.id], missing_ok=True)

    def is_deleted(self) -> bool:
        return self._deleted

    def keep(self) -> "RemoteArray":
        """Stops owning the tensor: neither GC nor Client.close() deletes it,
        and it leaves the client's session (PersistTensors), so it outlives
        this process until someone deletes it."""
        if self._owned:
            self._client.persist([self.id])
        self._owned = False
        if self._finalizer is not None:
            self._finalizer.detach()
        self._client.untrack(self.id)
        return self

    def _consumed(self) -> None:
        """The daemon consumed the tensor (a donation): forget it here
        without another call."""
        self._owned = False
        self._deleted = True
        if self._finalizer is not None:
            self._finalizer.detach()
        self._client.untrack(self.id)

    def __enter__(self) -> "RemoteArray":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.delete()

    def __repr__(self) -> str:
        what = _dtypes.describe(self._info.dtype, self.shape)
        state = ", deleted" if self._deleted else ""
        try:
            sharding = repr(self.sharding)
        except errors.PlacementError:
            sharding = "?"
        name = f", name={self.name!r}" if self.name else ""
        return f"RemoteArray({what}, {sharding}, id={self.id!r}{name}{state})"


def is_remote(x: Any) -> bool:
    return isinstance(x, RemoteArray)
