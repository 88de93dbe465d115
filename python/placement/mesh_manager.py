"""The seed's artifex DeviceMeshManager, over the daemon's MeshService.

Meshes are created on the daemon (CreateMesh) and returned as
placement.Mesh values that every placement call accepts. Without explicit
devices the daemon picks the first devices in its topology order; with them
(DeviceMeshManager(devices=...) or create_device_mesh(..., devices=...))
the first N of those, row-major. More devices than available is the seed's
"Not enough devices: mesh requires {total} devices but only {n} available."
(a FailedPreconditionError, which is a ValueError as in the seed); sizes < 1
are InvalidArgumentError (the seed let {"data": -1} through).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from placement import errors
from placement.client import Client, resolve
from placement.devices import Device, device_id
from placement.sharding import Mesh, as_mesh
from placement.v1 import mesh_service_pb2 as mpb

MeshShape = Union[Dict[str, int], Sequence[Tuple[str, int]]]


class DeviceMeshManager:
    """Manager for creating and configuring device meshes.

    `devices`: placement.Devices, ids or JAX devices to build meshes from
    (None: every daemon device).
    """

    def __init__(self, devices: Sequence[Any] | None = None, *,
                 client: Optional[Client] = None) -> None:
        self._client = resolve(client)
        every = self._client.devices()
        self._explicit = devices is not None
        if devices is None:
            self._devices = every
        else:
            self._devices = self._pick(devices, every)

    @staticmethod
    def _pick(devices: Sequence[Any], every: List[Device]) -> List[Device]:
        by_id = {d.id: d for d in every}
        chosen: List[Device] = []
        for i, d in enumerate(devices):
            did = device_id(d)
            if did not in by_id:
                raise errors.NotFoundError(f"devices[{i}]: device {did} does not exist (the "
                                           f"daemon has {len(every)} devices)")
            if by_id[did] in chosen:
                raise errors.InvalidArgumentError(f"devices[{i}]: device {did} is listed twice")
            chosen.append(by_id[did])
        return chosen

    @property
    def num_devices(self) -> int:
        """Number of available devices."""
        return len(self._devices)

    @property
    def devices(self) -> List[Any]:
        """List of available devices."""
        return list(self._devices)

    def _ids_for(self, total: int, devices: Optional[Sequence[Any]]) -> List[int]:
        """Explicit device ids for a mesh of `total` devices ([] = the
        daemon picks)."""
        if devices is not None:
            pool = self._pick(devices, self._client.devices())
        elif self._explicit:
            pool = self._devices
        else:
            return []
        if total > len(pool):
            raise errors.FailedPreconditionError(
                f"Not enough devices: mesh requires {total} devices but only {len(pool)} "
                f"available.")
        return [d.id for d in pool[:total]] if total >= 1 else []

    def create_device_mesh(self, mesh_shape: MeshShape,
                           devices: Sequence[Any] | None = None) -> Mesh:
        """Create a device mesh from {"data": 2, "model": 1} or
        [("data", 2), ("model", 1)] (same meaning)."""
        axes = list(mesh_shape.items()) if isinstance(mesh_shape, dict) else list(mesh_shape)
        request = mpb.CreateMeshRequest()
        total = 1
        for i, axis in enumerate(axes):
            if not (isinstance(axis, (tuple, list)) and len(axis) == 2):
                raise errors.InvalidArgumentError(
                    f"mesh_shape[{i}] is {axis!r}; expected an (axis_name, size) pair")
            name, size = axis
            request.axes.axes.add(name=str(name), size=int(size))
            total *= int(size)
        if all(a.size >= 1 for a in request.axes.axes):
            request.device_ids.extend(self._ids_for(total, devices))
        return self._client._create_mesh(request)

    def create_data_parallel_mesh(self, num_devices: int | None = None,
                                  axis_name: str = "data") -> Mesh:
        """Create a mesh for data parallelism (None: every device)."""
        return self._one_axis("data_parallel", num_devices, axis_name)

    def create_model_parallel_mesh(self, num_devices: int | None = None,
                                   axis_name: str = "model") -> Mesh:
        """Create a mesh for model parallelism (None: every device)."""
        return self._one_axis("model_parallel", num_devices, axis_name)

    def _one_axis(self, preset: str, num_devices: Optional[int], axis_name: str) -> Mesh:
        request = mpb.CreateMeshRequest()
        p = getattr(request, preset)
        p.axis_name = axis_name
        if num_devices is not None:
            p.num_devices = int(num_devices)
        if self._explicit:
            n = self.num_devices if num_devices is None else int(num_devices)
            if n >= 1:
                request.device_ids.extend(self._ids_for(n, None))
                p.num_devices = n
        return self._client._create_mesh(request)

    def create_hybrid_mesh(self, data_parallel_size: int = 1, model_parallel_size: int = 1,
                           data_axis: str = "data", model_axis: str = "model") -> Mesh:
        """Create a (data_parallel_size, model_parallel_size) mesh; device k
        sits at (k // mp, k % mp)."""
        request = mpb.CreateMeshRequest()
        h = request.hybrid
        h.data_parallel_size = int(data_parallel_size)
        h.model_parallel_size = int(model_parallel_size)
        h.data_axis = data_axis
        h.model_axis = model_axis
        if self._explicit and data_parallel_size >= 1 and model_parallel_size >= 1:
            request.device_ids.extend(
                self._ids_for(int(data_parallel_size) * int(model_parallel_size), None))
        return self._client._create_mesh(request)

    def get_mesh_info(self, mesh: Any) -> Dict[str, Any]:
        """{"total_devices": n, "axes": {name: size}} in mesh order (ours or
        a JAX mesh)."""
        m = as_mesh(mesh)
        return {"total_devices": m.size, "axes": dict(m.shape)}
