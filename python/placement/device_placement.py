"""The seed's artifex DevicePlacement, over the daemon.

Names, signatures, defaults and messages are the seed's
(artifex.generative_models.training.distributed.device_placement); arrays
land on the daemon's devices instead of this process's JAX devices and come
back as RemoteArray pytrees. Hardware detection, the batch-size table and
validate_batch_size's four messages are answered by the daemon
(DeviceService), so every client agrees with placectl and the C++ library.

Differences from the seed (see ../shared/SEED_BEHAVIOUR.md): HardwareType
also has H200 and B200; BatchSizeRecommendation carries the daemon's
roofline figure in an extra field that takes no part in equality;
replicate_across_devices accepts scalars; prefetch_to_device overlaps
transfers for real (a background producer thread; see placement.prefetch).
"""
from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from placement import _placing
from placement.client import Client, default_client, hardware_name, resolve
from placement.devices import device_id
from placement.v1 import device_service_pb2 as dpb


class HardwareType(enum.Enum):
    """Enumeration of supported hardware types."""

    TPU_V5E = "tpu_v5e"
    TPU_V5P = "tpu_v5p"
    TPU_V4 = "tpu_v4"
    H100 = "h100"
    A100 = "a100"
    V100 = "v100"
    CPU = "cpu"
    UNKNOWN = "unknown"
    H200 = "h200"  # not in the seed
    B200 = "b200"  # not in the seed


@dataclass(frozen=True)
class Roofline:
    """Peak dense bf16 FLOP/s over memory bandwidth (the daemon's figure)."""

    peak_flops_per_second: float
    memory_bytes_per_second: float
    critical_batch_size: float
    source: str


@dataclass(frozen=True)
class BatchSizeRecommendation:
    """Hardware-specific batch size recommendations.

    Attributes:
        min_batch_size: Minimum batch size for reasonable efficiency.
        optimal_batch_size: Optimal batch size for peak throughput.
        critical_batch_size: Critical batch size for reaching roofline (per JAX guide).
        max_memory_batch_size: Maximum batch size before OOM (estimate).
        notes: Additional notes about the recommendation.
    """

    min_batch_size: int
    optimal_batch_size: int
    critical_batch_size: int
    max_memory_batch_size: Optional[int] = None
    notes: str = ""
    roofline: Optional[Roofline] = field(default=None, compare=False, repr=False)


def _hardware(value: Any) -> HardwareType:
    if isinstance(value, HardwareType):
        return value
    try:
        return HardwareType(str(value).lower())
    except ValueError:
        return HardwareType.UNKNOWN


def _recommendation(client: Client, hardware: Optional[Any]) -> BatchSizeRecommendation:
    request = dpb.GetBatchSizeRecommendationRequest()
    if hardware is not None:
        request.hardware_name = hardware.value if isinstance(hardware, HardwareType) \
            else str(hardware)
    r = client.unary(client.device_stub.GetBatchSizeRecommendation, request,
                     idempotent=True).recommendation
    roofline = None
    if r.HasField("roofline"):
        roofline = Roofline(r.roofline.peak_flops_per_second, r.roofline.memory_bytes_per_second,
                            r.roofline.critical_batch_size, r.roofline.source)
    return BatchSizeRecommendation(
        min_batch_size=r.min_batch_size, optimal_batch_size=r.optimal_batch_size,
        critical_batch_size=r.critical_batch_size,
        max_memory_batch_size=r.max_memory_batch_size if r.HasField("max_memory_batch_size")
        else None,
        notes=r.notes, roofline=roofline)


class DevicePlacement:
    """Utility class for explicit device placement of arrays on the daemon's
    devices.

    `default_device`: a placement.Device, a device id or a JAX device; None
    uses the daemon's first device. `client`: the daemon (default: the
    default client, see placement.connect).
    """

    def __init__(self, default_device: Any | None = None, *,
                 client: Optional[Client] = None) -> None:
        self._client = resolve(client)
        devices = self._client.devices()
        self._default_device = default_device if default_device is not None else devices[0]
        device_id(self._default_device)  # validates its type now
        info = self._client.unary(self._client.device_stub.GetDeviceInfo,
                                  dpb.GetDeviceInfoRequest(), idempotent=True)
        self._hardware_type = _hardware(info.hardware_type_name
                                        or hardware_name(info.hardware_type))
        self._num_devices = int(info.num_devices)

    @property
    def client(self) -> Client:
        return self._client

    @property
    def hardware_type(self) -> HardwareType:
        """The detected hardware type."""
        return self._hardware_type

    @property
    def num_devices(self) -> int:
        """Number of available devices."""
        return self._num_devices

    @property
    def default_device(self) -> Any:
        return self._default_device

    # --- Placement ----------------------------------------------------------
    def place_on_device(self, data: Any, device: Any | None = None) -> Any:
        """Place data (a pytree) on a specific device (default: the default device)."""
        target = device if device is not None else self._default_device
        return _placing.place_tree(self._client, data, _placing.device_rule(target))

    def distribute_batch(self, data: Any, sharding: Any) -> Any:
        """Distribute data across devices using the specified sharding. Spec
        entries beyond a leaf's rank must be None and are dropped, so
        P("data", None) serves images [8,28,28,3] and labels [8] alike."""
        return _placing.place_tree(self._client, data,
                                   _placing.sharding_rule(self._client, sharding))

    def replicate_across_devices(self, data: Any, devices: List[Any] | None = None) -> Any:
        """Replicate data across all specified devices (all when None) on a
        one-axis mesh named "replica"."""
        return _placing.place_tree(self._client, data, _placing.replicate_rule(devices))

    def shard_batch_dim(self, data: Any, mesh: Any, batch_axis: int = 0,
                        mesh_axis: str = "data") -> Any:
        """Shard data along the batch dimension: per leaf, rank 0 or
        batch_axis >= rank -> replicated; negative batch_axis counts from the
        end; an indivisible dimension is an error naming the numbers."""
        return _placing.place_tree(
            self._client, data,
            _placing.shard_batch_dim_rule(self._client, mesh, batch_axis, mesh_axis))

    def prefetch_to_device(self, data_iterator: Iterator[Any], device: Any | None = None,
                           buffer_size: int = 2, *, views: bool = False) -> Iterator[Any]:
        """An iterator of device-placed batches: a background thread uploads
        up to buffer_size batches ahead of the consumer. `device` may also be
        a sharding. `views`: against a same-host daemon each batch comes with
        zero-copy views of its tensors (np.asarray of a leaf reads the
        daemon's memory in place). See placement.prefetch.PrefetchIterator."""
        from placement.prefetch import PrefetchIterator

        target = device if device is not None else self._default_device
        rule = _placing.sharding_rule(self._client, target)
        return PrefetchIterator(self._client, data_iterator, rule, buffer_size, views=views)

    # --- Advice and info ------------------------------------------------------
    def get_batch_size_recommendation(
            self, hardware_type: HardwareType | None = None) -> BatchSizeRecommendation:
        """Get batch size recommendation for the current (or given) hardware."""
        return _recommendation(self._client, hardware_type or self._hardware_type)

    def validate_batch_size(self, batch_size: int,
                            warn_suboptimal: bool = True) -> Tuple[bool, str]:
        """Validate batch size against hardware recommendations:
        (is_valid, message) with the seed's four messages."""
        request = dpb.ValidateBatchSizeRequest(batch_size=int(batch_size),
                                               warn_suboptimal=bool(warn_suboptimal),
                                               hardware_name=self._hardware_type.value)
        r = self._client.unary(self._client.device_stub.ValidateBatchSize, request,
                               idempotent=True)
        return bool(r.valid), r.message

    def get_device_info(self) -> Dict[str, Any]:
        """num_devices, hardware_type (string value), platforms, device_kinds,
        devices (each id, platform, device_kind)."""
        r = self._client.unary(self._client.device_stub.GetDeviceInfo,
                               dpb.GetDeviceInfoRequest(), idempotent=True)
        return {
            "num_devices": int(r.num_devices),
            "hardware_type": r.hardware_type_name or hardware_name(r.hardware_type),
            "platforms": list(r.platforms),
            "device_kinds": list(r.device_kinds),
            "devices": [{"id": int(d.id), "platform": d.platform, "device_kind": d.device_kind}
                        for d in r.devices],
        }


_default_lock = threading.Lock()
_default_placement: Optional[DevicePlacement] = None


def _default() -> DevicePlacement:
    global _default_placement
    client = default_client()
    with _default_lock:
        if _default_placement is None or _default_placement.client is not client:
            _default_placement = DevicePlacement(client=client)
        return _default_placement


def place_on_device(data: Any, device: Any | None = None) -> Any:
    """Convenience function for placing data on a device (default: the first)."""
    return _default().place_on_device(data, device)


def distribute_batch(data: Any, sharding: Any) -> Any:
    """Convenience function for distributing data across devices."""
    return _default().distribute_batch(data, sharding)


def get_batch_size_recommendation(
        hardware_type: HardwareType | None = None) -> BatchSizeRecommendation:
    """Get batch size recommendation for current or specified hardware."""
    return _default().get_batch_size_recommendation(hardware_type)
