"""Daemon devices as Python objects (the counterpart of jax.Device).

A Device is a snapshot of one entry of DeviceService.ListDevices: identity
(id, platform, device_kind, process_index, local_index) plus the memory
figures at the time it was listed. Devices compare and hash by id.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from placement import _jax_devices, errors
from placement.v1 import types_pb2


@dataclass(frozen=True, eq=False)
class Device:
    id: int
    platform: str
    device_kind: str
    process_index: int = 0
    local_index: int = 0
    hardware_type: str = "unknown"
    memory_total_bytes: int = field(default=0, repr=False)
    memory_in_use_bytes: int = field(default=0, repr=False)
    memory_limit_bytes: int = field(default=0, repr=False)
    # Freed blocks the daemon keeps for reuse; they count against the budget.
    memory_cached_bytes: int = field(default=0, repr=False)
    # What the buffers in use cost against the budget (blocks + host overhead).
    memory_charged_bytes: int = field(default=0, repr=False)

    @classmethod
    def from_proto(cls, d: types_pb2.Device) -> "Device":
        hw = types_pb2.HardwareType.Name(d.hardware_type).replace("HARDWARE_TYPE_", "").lower()
        return cls(id=d.id, platform=d.platform, device_kind=d.device_kind,
                   process_index=d.process_index, local_index=d.local_index, hardware_type=hw,
                   memory_total_bytes=d.memory_total_bytes,
                   memory_in_use_bytes=d.memory_in_use_bytes,
                   memory_limit_bytes=d.memory_limit_bytes,
                   memory_cached_bytes=d.memory_cached_bytes,
                   memory_charged_bytes=d.memory_charged_bytes)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self) -> int:
        return hash(("placement.Device", self.id))

    def __repr__(self) -> str:
        return f"Device(id={self.id}, platform={self.platform!r}, kind={self.device_kind!r})"


def is_jax_object(obj: Any) -> bool:
    """True for instances of JAX's own classes (devices, meshes, shardings)."""
    return (type(obj).__module__ or "").startswith(("jax", "jaxlib"))


def _is_jax_device(obj: Any) -> bool:
    return is_jax_object(obj) and hasattr(obj, "platform")


def device_id(obj: Any) -> int:
    """The daemon device id for a Device, an int, or a JAX device (mapped by
    placement._jax_devices.daemon_device_id)."""
    if isinstance(obj, Device):
        return obj.id
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, bool):
        return int(obj)
    if _is_jax_device(obj):
        return _jax_devices.daemon_device_id(obj)
    raise errors.InvalidArgumentError(
        f"expected a placement.Device, a device id or a JAX device, got {type(obj).__name__}: "
        f"{obj!r}")


def maybe_device_id(obj: Optional[Any]) -> Optional[int]:
    return None if obj is None else device_id(obj)
