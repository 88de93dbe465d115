"""The seed's DataParallel against a real daemon: shardings, shard_batch and
its static twin, shard_model_state, replicate_params, all_reduce_gradients
(mean / sum, fused per mesh and dtype, the seed's error text)."""
import numpy as np
import pytest

import placement
from placement import (DataParallel, DeviceMeshManager, NamedSharding, PartitionSpec, errors)


@pytest.fixture
def mesh(client):
    return DeviceMeshManager().create_data_parallel_mesh()


def test_create_data_parallel_sharding(client, mesh):
    dp = DataParallel()
    sharding = dp.create_data_parallel_sharding(mesh)
    assert sharding == NamedSharding(mesh, PartitionSpec("data"))
    assert DataParallel.create_data_parallel_sharding_static(mesh) == sharding
    batch_mesh = DeviceMeshManager().create_data_parallel_mesh(axis_name="batch")
    assert dp.create_data_parallel_sharding(batch_mesh, data_axis="batch").spec == \
        PartitionSpec("batch")
    with pytest.raises(errors.InvalidArgumentError) as e:
        dp.create_data_parallel_sharding(batch_mesh)
    assert "has no axis 'data'" in str(e.value)


def test_shard_batch_and_static(client, mesh):
    dp = DataParallel()
    sharding = dp.create_data_parallel_sharding(mesh)
    batch = {"inputs": np.ones((32, 784), np.float32), "targets": np.zeros((32,))}
    sharded = dp.shard_batch(batch, sharding)
    assert sharded["inputs"].addressable_shards[7].index[0] == slice(28, 32)
    static = DataParallel.shard_batch_static(batch, sharding)
    np.testing.assert_array_equal(np.asarray(static["targets"]), batch["targets"])


def test_shard_model_state(client, mesh):
    dp = DataParallel()
    state = {"w": np.arange(16, dtype=np.float32).reshape(8, 2), "b": np.zeros(8, np.float32)}
    replicated = dp.shard_model_state(state, mesh)
    assert replicated["w"].is_fully_replicated()
    sharded = dp.shard_model_state(state, mesh, param_sharding="shard")
    assert sharded["w"].sharding.spec == PartitionSpec("data")
    with pytest.raises(errors.InvalidArgumentError) as e:
        dp.shard_model_state(state, mesh, param_sharding="shrad")
    assert str(e.value) == "Unsupported param_sharding: 'shrad'. Use 'replicate' or 'shard'."
    params = dp.replicate_params(state, mesh)
    assert params["b"].sharding == NamedSharding(mesh, PartitionSpec())


def test_all_reduce_gradients_mean_and_sum(client):
    manager = DeviceMeshManager()
    mesh = manager.create_data_parallel_mesh(axis_name="batch")
    # pmap-style: one gradient block per device, stacked on dimension 0.
    per_device_w = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
    per_device_b = np.arange(8, dtype=np.int32).reshape(8, 1)
    grads = DataParallel().shard_batch({"w": per_device_w, "b": per_device_b},
                                       NamedSharding(mesh, PartitionSpec("batch")))
    mean = DataParallel().all_reduce_gradients(grads)  # defaults: "mean" over "batch"
    np.testing.assert_allclose(np.asarray(mean["w"]), per_device_w.mean(0, keepdims=True))
    assert mean["w"].is_fully_replicated()
    assert np.asarray(mean["b"]).tolist() == [[3]]  # integer mean truncates (28 / 8)
    total = DataParallel.all_reduce_gradients_static(grads, reduce_type="sum", axis_name="batch")
    np.testing.assert_allclose(np.asarray(total["w"]), per_device_w.sum(0, keepdims=True))
    assert DataParallel().all_reduce_gradients({}) == {}


def test_all_reduce_gradients_partial_pieces(client):
    mesh = DeviceMeshManager().create_data_parallel_mesh(axis_name="batch")
    pieces = [placement.device_put(np.full((2, 2), float(i), np.float32), i) for i in range(8)]
    partial = placement.make_array_from_single_device_arrays(
        (2, 2), NamedSharding(mesh, PartitionSpec(), partial_axes=("batch",)), pieces,
        donate=True)
    assert partial.sharding.partial_axes == ("batch",)
    summed = DataParallel().all_reduce_gradients({"g": partial}, reduce_type="sum")
    np.testing.assert_array_equal(np.asarray(summed["g"]), np.full((2, 2), 28.0))


def test_all_reduce_gradients_errors(client, mesh):
    with pytest.raises(ValueError) as e:
        DataParallel().all_reduce_gradients({}, reduce_type="max")
    assert str(e.value) == "Unsupported reduce_type: max. Use 'mean' or 'sum'."
    grads = DataParallel().shard_batch({"w": np.ones((8, 2), np.float32)},
                                       NamedSharding(mesh, PartitionSpec("data")))
    with pytest.raises(errors.InvalidArgumentError) as e:  # the seed's default axis "batch"
        DataParallel().all_reduce_gradients(grads)
    assert "'batch'" in str(e.value) and "data" in str(e.value)
    with pytest.raises(errors.InvalidArgumentError):
        DataParallel().all_reduce_gradients({"w": np.ones(3)})
