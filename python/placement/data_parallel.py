"""The seed's artifex DataParallel, over the daemon.

Shardings are placement.NamedSharding values (JAX's are accepted); batches
and states are pytrees of host arrays or RemoteArrays, placed in one call.
all_reduce_gradients runs on the daemon (CollectiveService.AllReduceBatch):
every leaf is a per-device gradient tensor -- dimension 0 sharded over
`axis_name` (one block per device, as pmap stacks them) or partial over it
(make_array_from_single_device_arrays with NamedSharding(...,
partial_axes=(axis,))) -- and the result is the reduction, replicated over
the axis. Leaves sharing a mesh and dtype go in one fused call.

In a cluster (placement.cluster) gradients may span nodes: the default
controller "single" lets one trainer's call reduce them across every daemon;
with controller="multi" every node's trainer makes the same call and they
run once together.

Differences from the seed: shard_model_state rejects a param_sharding other
than "replicate" / "shard" (the seed silently sharded on typos).
"""
from __future__ import annotations

from typing import Any, Optional, Union

from placement import _placing, _tree, collectives, errors
from placement.array import is_remote
from placement.client import Client, resolve
from placement.cluster import Controller
from placement.sharding import NamedSharding, PartitionSpec, as_mesh


class DataParallel:
    """Data parallel training utilities (instance and *_static forms).
    `controller`: the default of all_reduce_gradients (None: single)."""

    def __init__(self, *, client: Optional[Client] = None,
                 controller: Union[None, str, Controller] = None) -> None:
        self._client = client
        self._controller = Controller.of(controller)

    @property
    def client(self) -> Client:
        return resolve(self._client)

    # --- Shardings ------------------------------------------------------------
    def create_data_parallel_sharding(self, mesh: Any, data_axis: str = "data") -> NamedSharding:
        """NamedSharding(mesh, PartitionSpec(data_axis))."""
        return DataParallel.create_data_parallel_sharding_static(mesh, data_axis)

    @staticmethod
    def create_data_parallel_sharding_static(mesh: Any, data_axis: str = "data") -> NamedSharding:
        m = as_mesh(mesh)
        if data_axis not in m.axis_names:
            raise errors.InvalidArgumentError(
                f"data_axis: mesh {m!r} has no axis '{data_axis}' (axes: "
                f"{', '.join(m.axis_names)})")
        return NamedSharding(m, PartitionSpec(data_axis))

    # --- Placement ---------------------------------------------------------------
    def shard_batch(self, batch: Any, sharding: Any) -> Any:
        """Shard a batch (pytree) across devices with one sharding for every leaf."""
        return DataParallel.shard_batch_static(batch, sharding, client=self._client)

    @staticmethod
    def shard_batch_static(batch: Any, sharding: Any, *, client: Optional[Client] = None) -> Any:
        c = resolve(client)
        return _placing.place_tree(c, batch, _placing.sharding_rule(c, sharding))

    def shard_model_state(self, state: Any, mesh: Any, param_sharding: str = "replicate") -> Any:
        """"replicate" -> P() on the mesh; "shard" -> dimension 0 over the
        mesh's first axis."""
        c = self.client
        return _placing.place_tree(c, state, _placing.model_state_rule(c, mesh, param_sharding))

    def replicate_params(self, params: Any, mesh: Any) -> Any:
        """Replicate parameters across all devices of the mesh (P())."""
        c = self.client
        return _placing.place_tree(
            c, params, _placing.sharding_rule(c, NamedSharding(as_mesh(mesh), PartitionSpec())))

    # --- Collectives --------------------------------------------------------------
    def all_reduce_gradients(self, gradients: Any, reduce_type: str = "mean",
                             axis_name: str = "batch", *,
                             controller: Union[None, str, Controller] = None,
                             timeout: Optional[float] = None) -> Any:
        """Aggregate gradients across devices ("mean" or "sum") over
        `axis_name` of their mesh. Note the seed's default axis name "batch".
        `controller` (default: this DataParallel's): "multi" when every
        node's trainer makes this call for the same gradients
        (placement.collectives)."""
        return DataParallel.all_reduce_gradients_static(
            gradients, reduce_type, axis_name, client=self._client,
            controller=controller if controller is not None else self._controller,
            timeout=timeout)

    @staticmethod
    def all_reduce_gradients_static(gradients: Any, reduce_type: str = "mean",
                                    axis_name: str = "batch", *,
                                    client: Optional[Client] = None,
                                    controller: Union[None, str, Controller] = None,
                                    timeout: Optional[float] = None) -> Any:
        if reduce_type not in ("mean", "sum"):
            raise errors.InvalidArgumentError(
                f"Unsupported reduce_type: {reduce_type}. Use 'mean' or 'sum'.")
        Controller.of(controller)  # checked before anything is sent
        leaves, _, keys = _tree.flatten(gradients, is_leaf=is_remote)
        for key, leaf in zip(keys, leaves):
            if not is_remote(leaf):
                raise errors.InvalidArgumentError(
                    f"all_reduce_gradients: gradient {key} is a "
                    f"{type(leaf).__name__}; gradients must be per-device daemon tensors "
                    f"(RemoteArray)")
        return collectives.all_reduce_tree(gradients, reduce_type, (axis_name,),
                                           controller=controller, timeout=timeout,
                                           client=client)
