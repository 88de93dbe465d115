"""Mesh, PartitionSpec, NamedSharding, SingleDeviceSharding -- mirrors of
jax.sharding for daemon devices.

They are plain values: a Mesh is an n-d array of devices with axis names
(device objects may be placement.Device, daemon ids, or JAX devices, which
map to daemon devices through placement.jax_bridge.daemon_device_id). The
daemon learns of a mesh the first time a placement uses it (MeshService
CreateMesh; the client caches the id), so `Mesh(np.array(devices), ("data",))`
works exactly as in JAX. Every function that takes a sharding also takes
JAX's own Mesh / NamedSharding / PartitionSpec / SingleDeviceSharding
(as_sharding converts them).

`with mesh:` makes it the current mesh of this thread (loadax's
host_to_global_device_array needs one), as JAX's Mesh does.
"""
from __future__ import annotations

import collections
import threading
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from placement import errors
from placement.devices import device_id, is_jax_object
from placement.v1 import types_pb2

SpecEntry = Union[None, str, Tuple[str, ...]]


class PartitionSpec(tuple):
    """PartitionSpec('data', None, ('x', 'y')): per leading dimension, no
    axis (None), one axis, or a tuple of axes (first most significant)."""

    def __new__(cls, *entries: Any) -> "PartitionSpec":
        return super().__new__(cls, tuple(_entry(e) for e in entries))

    def __repr__(self) -> str:
        return "PartitionSpec(" + ", ".join(repr(e) for e in self) + ")"

    def to_proto(self) -> types_pb2.PartitionSpec:
        spec = types_pb2.PartitionSpec()
        for e in self:
            dim = spec.dims.add()
            if isinstance(e, str):
                dim.axes.append(e)
            elif e is not None:
                dim.axes.extend(e)
        return spec

    @classmethod
    def from_proto(cls, spec: types_pb2.PartitionSpec) -> "PartitionSpec":
        entries: List[SpecEntry] = []
        for dim in spec.dims:
            axes = list(dim.axes)
            entries.append(None if not axes else axes[0] if len(axes) == 1 else tuple(axes))
        return cls(*entries)


P = PartitionSpec


def _entry(e: Any) -> SpecEntry:
    if e is None or isinstance(e, str):
        return e
    if isinstance(e, (tuple, list)):
        if not all(isinstance(a, str) for a in e):
            raise errors.InvalidArgumentError(f"PartitionSpec entry {e!r}: axis names must be str")
        return tuple(e) if len(e) != 1 else e[0]
    raise errors.InvalidArgumentError(
        f"PartitionSpec entry {e!r} is not None, an axis name or a tuple of axis names")


_current = threading.local()


AXIS_TYPES = ("auto", "explicit", "manual")


def _axis_types(types: Any, n: int) -> Optional[Tuple[str, ...]]:
    """JAX's AxisType values (or their names) as ("auto", "explicit",
    "manual") strings; None when every axis is Auto (JAX's default)."""
    if types is None:
        return None
    names = []
    for t in types:
        name = (getattr(t, "name", None) or str(t)).lower()
        if name not in AXIS_TYPES:
            raise errors.InvalidArgumentError(
                f"Mesh axis type {t!r} is not one of {', '.join(AXIS_TYPES)}")
        names.append(name)
    if len(names) != n:
        raise errors.InvalidArgumentError(
            f"Mesh: {len(names)} axis types {tuple(names)} for {n} axes")
    return None if all(name == "auto" for name in names) else tuple(names)


class Mesh:
    """Mesh(devices, axis_names, axis_types=None): `devices` an array (any
    nesting) whose shape gives the axis sizes, major to minor. `axis_types`
    are JAX's (jax.sharding.AxisType values or "auto" / "explicit" /
    "manual"; None: all Auto, as in JAX). The daemon does not keep them:
    they stay with this Mesh and with the Client that registered it, so that
    placement.to_jax rebuilds the JAX mesh with the axis types it had."""

    def __init__(self, devices: Any, axis_names: Union[str, Sequence[str]],
                 axis_types: Any = None, *, mesh_id: Optional[str] = None,
                 client: Any = None) -> None:
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        arr = np.array(devices, dtype=object)
        flat = list(arr.reshape(-1))
        if arr.ndim != len(axis_names):
            raise errors.InvalidArgumentError(
                f"Mesh: devices have {arr.ndim} dimensions {arr.shape} but {len(axis_names)} "
                f"axis names {tuple(axis_names)} were given")
        self.devices = arr
        self.axis_names: Tuple[str, ...] = tuple(axis_names)
        self.device_ids = np.array([device_id(d) for d in flat], dtype=np.int64).reshape(arr.shape)
        self.axis_types: Optional[Tuple[str, ...]] = _axis_types(axis_types, len(self.axis_names))
        self.id = mesh_id  # the daemon's id once known
        self._client = client

    @classmethod
    def from_proto(cls, mesh: types_pb2.Mesh, client: Any, axis_types: Any = None) -> "Mesh":
        shape = tuple(a.size for a in mesh.axes)
        by_id = {d.id: d for d in client.devices()}
        devs = [by_id.get(i, i) for i in mesh.device_ids]
        grid = np.empty(len(devs), dtype=object)
        grid[:] = devs
        return cls(grid.reshape(shape), tuple(a.name for a in mesh.axes), axis_types,
                   mesh_id=mesh.id, client=client)

    @property
    def shape(self) -> "collections.OrderedDict[str, int]":
        return collections.OrderedDict(zip(self.axis_names, self.devices.shape))

    @property
    def size(self) -> int:
        return int(self.devices.size)

    @property
    def empty(self) -> bool:
        return self.size == 0

    @property
    def device_set(self) -> set:
        return set(self.devices.flat)

    def key(self) -> Tuple[Any, ...]:
        return (self.axis_names, self.devices.shape, tuple(self.device_ids.reshape(-1).tolist()),
                self.axis_types)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Mesh) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        axes = ", ".join(f"{n!r}: {s}" for n, s in self.shape.items())
        types = f", axis_types={self.axis_types}" if self.axis_types else ""
        where = f", id={self.id!r}" if self.id else ""
        return f"Mesh({axes}{types}{where})"

    def __enter__(self) -> "Mesh":
        stack = getattr(_current, "stack", None)
        if stack is None:
            stack = _current.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _current.stack.pop()


def current_mesh() -> Optional[Mesh]:
    """The innermost `with mesh:` of this thread (ours or JAX's)."""
    stack = getattr(_current, "stack", None)
    if stack:
        return stack[-1]
    try:  # JAX's `with jax.set_mesh(mesh):`, then its older `with mesh:`
        from jax._src import mesh as jax_mesh
    except ImportError:
        return None
    candidates = []
    if hasattr(jax_mesh, "get_concrete_mesh"):
        candidates.append(lambda: jax_mesh.get_concrete_mesh())
    candidates.append(lambda: jax_mesh.thread_resources.env.physical_mesh)
    for get in candidates:
        try:
            found = get()
        except Exception:
            continue
        if found is not None and not getattr(found, "empty", True):
            return as_mesh(found)
    return None


class NamedSharding:
    """NamedSharding(mesh, spec). Extensions beyond JAX, for the daemon's
    collectives and uneven shapes: `partial_axes` (each device holds its own
    contribution along them, combined by `partial_op`: "sum", "mean", "max",
    "min", "prod") and `padded` (ceil-sized blocks instead of JAX's
    divisibility rule)."""

    def __init__(self, mesh: Any, spec: Any = None, *, partial_axes: Sequence[str] = (),
                 partial_op: Optional[str] = None, padded: bool = False) -> None:
        self.mesh = as_mesh(mesh)
        self.spec = as_spec(spec if spec is not None else PartitionSpec())
        self.partial_axes = tuple(partial_axes)
        self.partial_op = partial_op
        self.padded = padded
        self.memory_kind = None

    @property
    def device_set(self) -> set:
        return self.mesh.device_set

    @property
    def is_fully_replicated(self) -> bool:
        return all(e is None for e in self.spec) and not self.partial_axes

    def to_placement(self, mesh_id: str) -> types_pb2.Placement:
        placement = types_pb2.Placement()
        s = placement.sharding
        s.mesh_id = mesh_id
        s.spec.CopyFrom(self.spec.to_proto())
        s.partial_axes.extend(self.partial_axes)
        if self.partial_op:
            s.partial_op = types_pb2.ReduceOp.Value("REDUCE_OP_" + self.partial_op.upper())
        if self.padded:
            s.mode = types_pb2.SHARDING_MODE_PADDED
        return placement

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, NamedSharding) and self.mesh == other.mesh
                and _trim(self.spec) == _trim(other.spec)
                and self.partial_axes == other.partial_axes and self.padded == other.padded)

    def __hash__(self) -> int:
        return hash((self.mesh, _trim(self.spec), self.partial_axes))

    def __repr__(self) -> str:
        extra = f", partial_axes={self.partial_axes}" if self.partial_axes else ""
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r}{extra})"


def _trim(spec: PartitionSpec) -> Tuple[SpecEntry, ...]:
    entries = list(spec)
    while entries and entries[-1] is None:
        entries.pop()
    return tuple(entries)


class SingleDeviceSharding:
    """The whole array on one device."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.device_id = device_id(device)
        self.memory_kind = None

    @property
    def device_set(self) -> set:
        return {self.device}

    @property
    def is_fully_replicated(self) -> bool:
        return True

    def to_placement(self) -> types_pb2.Placement:
        return types_pb2.Placement(device_id=self.device_id)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, SingleDeviceSharding) and other.device_id == self.device_id

    def __hash__(self) -> int:
        return hash(("single", self.device_id))

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self.device!r})"


Sharding = Union[NamedSharding, SingleDeviceSharding]


def as_spec(spec: Any) -> PartitionSpec:
    if isinstance(spec, PartitionSpec):
        return spec
    if isinstance(spec, (tuple, list)) or (is_jax_object(spec) and hasattr(spec, "__iter__")):
        return PartitionSpec(*spec)  # JAX's PartitionSpec iterates over its entries
    raise errors.InvalidArgumentError(f"expected a PartitionSpec, got {type(spec).__name__}")


def as_mesh(mesh: Any) -> Mesh:
    """Our Mesh for ours or a jax.sharding.Mesh."""
    if isinstance(mesh, Mesh):
        return mesh
    if hasattr(mesh, "devices") and hasattr(mesh, "axis_names"):
        return Mesh(np.asarray(mesh.devices), tuple(mesh.axis_names),
                    getattr(mesh, "axis_types", None))
    raise errors.InvalidArgumentError(f"expected a Mesh, got {type(mesh).__name__}: {mesh!r}")


def as_sharding(obj: Any) -> Sharding:
    """Ours, JAX's NamedSharding / SingleDeviceSharding, or a device."""
    if isinstance(obj, (NamedSharding, SingleDeviceSharding)):
        return obj
    if hasattr(obj, "mesh") and hasattr(obj, "spec"):  # jax NamedSharding
        return NamedSharding(as_mesh(obj.mesh), as_spec(obj.spec))
    if is_jax_object(obj) and hasattr(obj, "device_set") and len(obj.device_set) == 1 \
            and getattr(obj, "is_fully_replicated", False):
        return SingleDeviceSharding(next(iter(obj.device_set)))
    try:
        return SingleDeviceSharding(obj)
    except errors.InvalidArgumentError:
        raise errors.InvalidArgumentError(
            f"expected a NamedSharding, SingleDeviceSharding or device, got "
            f"{type(obj).__name__}: {obj!r}") from None
