"""JAX devices <-> daemon device ids (needs JAX only when called).

A JAX device maps to daemon device `process_index * 1024 + k`, where k is its
position among that process's JAX devices (ordered by id) -- the daemon's own
numbering, so JAX's 8 forced CPU devices are daemon devices 0..7.
set_device_map() replaces the rule (a callable from a JAX device to a daemon
id). Below placement.devices in the import order, so that device_id() can
take JAX devices without importing the JAX bridge.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from placement import errors

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
