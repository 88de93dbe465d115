"""Client: one connection to a placementd, and the process-wide default.

    import placement
    client = placement.connect("127.0.0.1:50051")   # also the default client
    client.devices()                                 # [Device(id=0, ...), ...]

Without connect(), the first call that needs the daemon connects to
$PLACEMENT_TARGET, else 127.0.0.1:50051 (placementd's default address).

A Client is thread-safe. It owns the tensors it created: a RemoteArray that
is garbage-collected is deleted on the daemon by a background thread (never
inside the collector), and close() -- also run at interpreter exit -- deletes
every tensor still alive unless it was kept (RemoteArray.keep()). It owns
its shared-memory regions likewise (placement.regions: the staging pool and
the caller's SharedRegions): close() unregisters them, and unmaps the
daemon's memory files kept mapped for uploads written in place
(placement._inplace).

So that a process that dies (killed, crashed, partitioned) leaves nothing
behind either, connect() opens a session (SessionService) that every call
joins, renewed in the background: the daemon frees what the client created
once the session's lease runs out (TransportOptions.session_ttl, default
60 s). TransportOptions(session="none") opts out (results are then durable
until deleted); session_id= joins a session opened elsewhere.
"""
from __future__ import annotations

import atexit
import os
import queue
import socket
import threading
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple

from placement import _region_pool, _session, _tensors, _transport, errors
from placement import _default as default_hook
from placement._transport import SessionPolicy, TransportOptions
from placement.devices import Device, device_id
from placement.sharding import Mesh, as_mesh
from placement.types import DaemonStatus, MemoryTrim, StreamStatus, TensorInfo
from placement.v1 import (collective_service_pb2_grpc, daemon_service_pb2,
                          daemon_service_pb2_grpc, device_service_pb2, device_service_pb2_grpc,
                          mesh_service_pb2, mesh_service_pb2_grpc, prefetch_service_pb2_grpc,
                          region_service_pb2, region_service_pb2_grpc, session_service_pb2,
                          session_service_pb2_grpc, tensor_service_pb2, tensor_service_pb2_grpc,
                          types_pb2, view_service_pb2, view_service_pb2_grpc)


class _RegionRelease:
    """A queued UnregisterRegion (a collected SharedRegion)."""

    def __init__(self, region_id: str) -> None:
        self.region_id = region_id


class _ExportRelease:
    """A queued Unexport (a view whose arrays were all collected)."""

    def __init__(self, export_id: str) -> None:
        self.export_id = export_id


class Client:
    """A connection to one daemon. See module docstring."""

    def __init__(self, target: str, options: Optional[TransportOptions] = None,
                 *, owner: Optional[str] = None) -> None:
        self.options = options or TransportOptions()
        self.transport = _transport.Transport(target, self.options)
        self.target = target
        self.owner = owner if owner is not None else \
            f"python/{socket.gethostname()}/{os.getpid()}"
        channel = self.transport.channel
        self.device_stub = device_service_pb2_grpc.DeviceServiceStub(channel)
        self.daemon_stub = daemon_service_pb2_grpc.DaemonServiceStub(channel)
        self.mesh_stub = mesh_service_pb2_grpc.MeshServiceStub(channel)
        self.tensor_stub = tensor_service_pb2_grpc.TensorServiceStub(channel)
        self.prefetch_stub = prefetch_service_pb2_grpc.PrefetchServiceStub(channel)
        self.collective_stub = collective_service_pb2_grpc.CollectiveServiceStub(channel)
        self.region_stub = region_service_pb2_grpc.RegionServiceStub(channel)
        self.view_stub = view_service_pb2_grpc.ViewServiceStub(channel)
        self.regions = _region_pool.RegionPool(self)
        self.tensors = _tensors.Tensors(self)
        self._lock = threading.Lock()
        self._devices: Optional[List[Device]] = None
        self._process: Optional[Tuple[int, int]] = None  # (process_index, process_count)
        self._meshes: Dict[Tuple[Any, ...], Mesh] = {}  # Mesh.key() -> registered Mesh
        self._meshes_by_id: Dict[str, Mesh] = {}
        self._live: "weakref.WeakValueDictionary[str, Any]" = weakref.WeakValueDictionary()
        self._doomed: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self._closed = False
        self._reaper = threading.Thread(target=self._reap, name="placement-reaper", daemon=True)
        self._reaper.start()
        self._session: Optional[_session.OwnSession] = None
        self._session_lock = threading.Lock()
        atexit.register(self.close)
        try:
            _transport.wait_ready(self.transport.channel, target, self.options.connect_timeout,
                                  tls=self.options.tls)
            # A session needs the daemon: with connect_timeout 0 the client
            # does not wait for it, and opens none.
            if (not self.options.session_id and self.options.session is SessionPolicy.OPEN
                    and self.options.connect_timeout > 0):
                self._session = _session.OwnSession(self.transport, self.options.session_ttl)
                self.transport.join_session(self._session.id)
                self.transport.recover_session = self._recover_session
        except BaseException:
            self.close()
            raise

    def _recover_session(self, error: errors.PlacementError) -> bool:
        """After the daemon forgot the client's session (it restarted, or the
        lease ran out while the process was stopped): opens a new one for the
        calls to come. What the old session held is gone with it."""
        gone = self._session
        if gone is None or not error.message.startswith("placement-session metadata:"):
            return False
        with self._session_lock:
            if self._session is not gone:
                return True  # another thread replaced it already
            gone.abandon()
            # The memory files kept mapped for uploads written in place: a
            # restarted daemon's are new ones (the old ones live on only
            # through the mappings); after a lapsed lease the next upload
            # merely maps afresh.
            self.tensors.inplace.cache.clear()
            # OpenSession must not carry the session that is gone.
            self.transport.leave_session()
            self._session = _session.OwnSession(self.transport, self.options.session_ttl)
            self.transport.join_session(self._session.id)
        return True

    @property
    def session_id(self) -> Optional[str]:
        """The session every call carries: the client's own
        (SessionPolicy.OPEN), TransportOptions.session_id, or None when
        results are durable."""
        if self._session is not None:
            return self._session.id
        return self.options.session_id or None

    # --- Devices and daemon -------------------------------------------------
    def unary(self, method: Any, request: Any, *, idempotent: bool,
              timeout: Optional[float] = None) -> Any:
        return self.transport.unary(method, request, idempotent=idempotent, timeout=timeout)

    def list_devices(self) -> List[Device]:
        """Every device with its memory figures now (DeviceService.ListDevices)."""
        response = self.unary(self.device_stub.ListDevices,
                              device_service_pb2.ListDevicesRequest(), idempotent=True)
        return [Device.from_proto(d) for d in response.devices]

    def devices(self, backend: Optional[str] = None) -> List[Device]:
        """The daemon's devices (listed once and cached), optionally only
        those of one platform ("cpu", "gpu"). Like jax.devices(backend), a
        platform the daemon does not have is an error."""
        with self._lock:
            cached = self._devices
        if cached is None:
            cached = self.list_devices()
            with self._lock:
                self._devices = cached
        if backend is None:
            return list(cached)
        chosen = [d for d in cached if d.platform == backend.lower()]
        if not chosen:
            present = sorted({d.platform for d in cached})
            raise RuntimeError(f"Unknown backend: '{backend}' requested, but no platforms that "
                               f"are instances of {backend} are present. Platforms present "
                               f"are: {','.join(present)}")
        return chosen

    def memory_in_use(self) -> Dict[int, int]:
        """Device id -> bytes the daemon holds there now."""
        return {d.id: d.memory_in_use_bytes for d in self.list_devices()}

    def status(self) -> DaemonStatus:
        """The daemon's version, backend, uptime, counts and cluster
        (DaemonService.GetStatus)."""
        return DaemonStatus.from_proto(
            self.unary(self.daemon_stub.GetStatus, daemon_service_pb2.GetStatusRequest(),
                       idempotent=True))

    def tensor_info(self, tensor: str) -> TensorInfo:
        """What the daemon holds as `tensor` (an id, or a name unique among
        your tensors): dtype, shape, sharding, shards (TensorService.Describe).
        NotFoundError for an unknown one; FailedPreconditionError naming the
        candidates for an ambiguous name."""
        return TensorInfo.from_proto(self.tensors.describe(tensor))

    def list_tensors(self, name_prefix: str = "", mesh_id: str = "") -> List[TensorInfo]:
        """Your tensors on the daemon (every tenant's for an admin), those
        whose name starts with `name_prefix` and, when given, on `mesh_id`;
        every page of TensorService.List."""
        return [TensorInfo.from_proto(t) for t in self.tensors.list(name_prefix, mesh_id)]

    def streams(self) -> List[StreamStatus]:
        """The uploads, downloads and prefetch streams open on the daemon now,
        with the bytes each moved so far (DaemonService.ListStreams; what
        `placectl top` shows)."""
        response = self.unary(self.daemon_stub.ListStreams,
                              daemon_service_pb2.ListStreamsRequest(), idempotent=True)
        return [StreamStatus.from_proto(s) for s in response.streams]

    def trim_memory(self, tenant: str = "") -> MemoryTrim:
        """Gives the daemon's cached device blocks and malloc's free pages
        back to the system now (DaemonService.TrimMemory): every tenant's
        when `tenant` is empty (admins only with authentication on), else
        only that tenant's cached blocks (a user may name its own tenant).
        PermissionDeniedError / NotFoundError (a tenant that never held memory there)
        as the daemon says."""
        return MemoryTrim.from_proto(
            self.unary(self.daemon_stub.TrimMemory,
                       daemon_service_pb2.TrimMemoryRequest(tenant=tenant), idempotent=True))

    @property
    def process_index(self) -> int:
        """The index of this client's daemon in its cluster (0 for a lone
        daemon started without --process_index): JAX's process_index().
        Asked once (GetStatus); a daemon keeps its index across restarts."""
        return self._cluster_identity()[0]

    @property
    def process_count(self) -> int:
        """How many daemons (processes) form the cluster; 1 for a lone daemon."""
        return self._cluster_identity()[1]

    def _cluster_identity(self) -> Tuple[int, int]:
        with self._lock:
            known = self._process
        if known is None:
            status = self.status()
            known = (int(status.process_index), max(1, int(status.cluster.num_processes)))
            with self._lock:
                self._process = known
        return known

    # --- Meshes ------------------------------------------------------------
    def create_mesh(self, axes: Any, *, devices: Optional[Sequence[Any]] = None,
                    mesh_id: str = "") -> Mesh:
        """Registers a mesh with ordered `axes` ({"data": 2, "model": 4} or
        [("data", 2), ("model", 4)], major to minor) over `devices` (row-major;
        None: the first devices in topology order) under `mesh_id` ("" = one
        the daemon makes up). The daemon's errors unchanged (ValueError
        "Not enough devices: mesh requires 16 devices but only 8 available.")."""
        items = list(axes.items()) if isinstance(axes, dict) else list(axes)
        request = mesh_service_pb2.CreateMeshRequest(mesh_id=mesh_id)
        for name, size in items:
            request.axes.axes.add(name=str(name), size=int(size))
        if devices is not None:
            request.device_ids.extend(device_id(d) for d in devices)
        return self._create_mesh(request)

    def _create_mesh(self, request: mesh_service_pb2.CreateMeshRequest,
                     axis_types: Any = None) -> Mesh:
        """MeshService.CreateMesh; the daemon's errors unchanged. The mesh is
        remembered with `axis_types` (JAX's; the daemon does not keep them)."""
        response = self.unary(self.mesh_stub.CreateMesh, request, idempotent=False)
        return self._remember(Mesh.from_proto(response.mesh, self, axis_types))

    def mesh(self, mesh_id: str) -> Mesh:
        """The registered mesh `mesh_id` (GetMesh once; meshes are immutable)."""
        with self._lock:
            known = self._meshes_by_id.get(mesh_id)
        if known is not None:
            return known
        response = self.unary(self.mesh_stub.GetMesh,
                              mesh_service_pb2.GetMeshRequest(mesh_id=mesh_id), idempotent=True)
        return self._remember(Mesh.from_proto(response.mesh, self))

    def mesh_id(self, mesh: Any) -> str:
        """The daemon id of `mesh` (ours or JAX's), registering it on first
        use with its devices in row-major order."""
        mesh = as_mesh(mesh)
        if mesh.id and mesh._client is self:
            return mesh.id
        with self._lock:
            known = self._meshes.get(mesh.key())
        if known is not None and known.id:
            return known.id
        request = mesh_service_pb2.CreateMeshRequest()
        for name, size in mesh.shape.items():
            request.axes.axes.add(name=name, size=size)
        request.device_ids.extend(int(i) for i in mesh.device_ids.reshape(-1))
        return str(self._create_mesh(request, mesh.axis_types).id)

    def _remember(self, mesh: Mesh) -> Mesh:
        with self._lock:
            self._meshes_by_id[str(mesh.id)] = mesh
            self._meshes.setdefault(mesh.key(), mesh)
        return mesh

    # --- Tensor lifetime ----------------------------------------------------
    def track(self, tensor_id: str, array: Any) -> None:
        """Registers a RemoteArray this client owns."""
        self._live[tensor_id] = array

    def untrack(self, tensor_id: str) -> None:
        self._live.pop(tensor_id, None)

    def persist(self, tensor_ids: Sequence[str]) -> None:
        """Takes the tensors out of the client's session (and any other), so
        that they outlive the client until deleted (PersistTensors)."""
        if self._session is not None:
            self._session.persist(tensor_ids)
        elif self.options.session_id:
            self.unary(session_service_pb2_grpc.SessionServiceStub(self.transport.channel)
                       .PersistTensors,
                       session_service_pb2.PersistTensorsRequest(tensor_ids=list(tensor_ids)),
                       idempotent=True)

    def release_later(self, tensor_id: str) -> None:
        """Queues a delete (safe from finalizers: no lock, no RPC here)."""
        self._doomed.put(tensor_id)

    def release_region_later(self, region_id: str) -> None:
        """Queues an UnregisterRegion (safe from finalizers)."""
        self._doomed.put(_RegionRelease(region_id))

    def release_export_later(self, export_id: str) -> None:
        """Queues an Unexport (safe from finalizers)."""
        self._doomed.put(_ExportRelease(export_id))

    def delete_tensors(self, tensor_ids: Sequence[str], *, missing_ok: bool = False) -> int:
        """TensorService.Delete; returns the bytes freed. With missing_ok,
        ids the daemon no longer knows are skipped."""
        request = tensor_service_pb2.DeleteTensorsRequest(tensor_ids=list(tensor_ids))
        try:
            response = self.unary(self.tensor_stub.Delete, request, idempotent=False)
            return response.freed_bytes
        except errors.NotFoundError:
            if not missing_ok:
                raise
        freed = 0
        for tid in tensor_ids:  # all-or-nothing failed: one by one
            try:
                freed += self.unary(self.tensor_stub.Delete,
                                    tensor_service_pb2.DeleteTensorsRequest(tensor_ids=[tid]),
                                    idempotent=False).freed_bytes
            except errors.NotFoundError:
                pass
        return freed

    def _reap(self) -> None:
        while True:
            item = self._doomed.get()
            batch: List[str] = []
            waiters: List[threading.Event] = []
            regions: List[str] = []
            exports: List[str] = []
            while True:
                if item is None:
                    return
                if isinstance(item, threading.Event):
                    waiters.append(item)
                elif isinstance(item, _RegionRelease):
                    regions.append(item.region_id)
                elif isinstance(item, _ExportRelease):
                    exports.append(item.export_id)
                else:
                    batch.append(item)
                try:
                    item = self._doomed.get_nowait()
                except queue.Empty:
                    break
            for export_id in exports:
                if self._closed:
                    break
                try:
                    self.unary(self.view_stub.Unexport,
                               view_service_pb2.UnexportRequest(export_id=export_id),
                               idempotent=False)
                except errors.PlacementError:
                    pass  # already ended (its session, this process's views by the daemon)
            if batch and not self._closed:
                try:
                    self.delete_tensors(batch, missing_ok=True)
                except errors.PlacementError:
                    pass  # the daemon is gone or draining: nothing to free
            for region_id in regions:
                if self._closed:
                    break
                try:
                    self.unary(self.region_stub.UnregisterRegion,
                               region_service_pb2.UnregisterRegionRequest(region_id=region_id),
                               idempotent=False)
                except errors.PlacementError:
                    pass  # already gone (its session ended, the daemon stopped)
            for w in waiters:
                w.set()

    def flush(self, timeout: float = 30.0) -> None:
        """Waits until the deletes queued by finalizers so far were sent."""
        done = threading.Event()
        self._doomed.put(done)
        done.wait(timeout)

    def close(self) -> None:
        """Deletes the tensors this client still owns, unregisters its
        shared-memory regions, closes its session (which frees whatever else
        it still holds) and closes the channel. Idempotent."""
        if self._closed:
            return
        self.flush(timeout=5.0)
        self.regions.close()
        self.tensors.inplace.close()  # unmaps the daemon's memory files
        live = [tid for tid, arr in list(self._live.items()) if getattr(arr, "_owned", False)]
        if live:
            try:
                self.delete_tensors(live, missing_ok=True)
            except errors.PlacementError:
                pass
        if getattr(self, "_session", None) is not None:
            try:
                self._session.close()
            except errors.PlacementError:
                pass  # the daemon is gone: its lease runs out there
        self._closed = True
        self._doomed.put(None)
        atexit.unregister(self.close)
        self.transport.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"placement.Client({self.target!r})"


_default_lock = threading.Lock()
_default: Optional[Client] = None


def connect(target: Optional[str] = None, *, options: Optional[TransportOptions] = None,
            owner: Optional[str] = None, **option_fields: Any) -> Client:
    """Connects to `target` ($PLACEMENT_TARGET, else 127.0.0.1:50051) and
    makes the client the default one. Keyword arguments are
    TransportOptions fields (timeout=..., chunk_bytes=...)."""
    global _default
    if options is None:
        options = TransportOptions(**option_fields)
    elif option_fields:
        raise errors.InvalidArgumentError("give either options= or option fields, not both")
    target = target or os.environ.get(_transport.TARGET_ENV) or _transport.DEFAULT_TARGET
    client = Client(target, options, owner=owner)
    with _default_lock:
        _default = client
    return client


def default_client() -> Client:
    """The client of the last connect(), connecting on first use."""
    global _default
    with _default_lock:
        if _default is not None and not _default._closed:
            return _default
    return connect()


def resolve(client: Optional[Client]) -> Client:
    return client if client is not None else default_client()


default_hook.install(default_client)


def hardware_name(value: int) -> str:
    return types_pb2.HardwareType.Name(value).replace("HARDWARE_TYPE_", "").lower()
