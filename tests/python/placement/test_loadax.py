"""loadax's placement helpers against a real daemon."""
import numpy as np
import pytest

import placement
from placement import (DataPartitionType, DeviceMeshManager, Mesh, errors,
                       global_to_host_array, host_to_global_device_array,
                       with_sharding_constraint)


def test_partition_type_values():
    assert [(m.name, m.value) for m in DataPartitionType] == [("FULL", "full"),
                                                              ("REPLICATED", "replicated")]


def test_full_and_replicated_round_trip(client):
    mesh = DeviceMeshManager().create_hybrid_mesh(2, 4)
    x = np.arange(16 * 3, dtype=np.float32).reshape(16, 3)
    y = np.arange(16, dtype=np.int64)
    with mesh:
        batch = host_to_global_device_array({"x": x, "y": y})
        assert batch["x"].shape == (16, 3)
        assert batch["x"].sharding.spec == placement.PartitionSpec(("data", "model"))
        back = global_to_host_array(batch)
        np.testing.assert_array_equal(back["x"], x)
        np.testing.assert_array_equal(back["y"], y)
        rep = host_to_global_device_array({"x": x}, partition=DataPartitionType.REPLICATED)
        assert rep["x"].is_fully_replicated()
        np.testing.assert_array_equal(
            global_to_host_array(rep, partition=DataPartitionType.REPLICATED)["x"], x)


def test_errors(client):
    mesh = DeviceMeshManager().create_data_parallel_mesh()
    with mesh:
        with pytest.raises(errors.InvalidArgumentError) as e:
            host_to_global_device_array({"x": np.ones((10, 3))})
        assert "([10,3]) cannot be sharded across 8 devices." in str(e.value)
        with pytest.raises(NotImplementedError) as e:
            host_to_global_device_array({"x": np.ones((8,))}, partition="rows")
        assert str(e.value) == "Unsupported partition: rows"
        batch = host_to_global_device_array({"a": np.ones((8,)), "b": np.ones((16,))})
        with pytest.raises(errors.InvalidArgumentError) as e:
            global_to_host_array(batch)
        assert "batch size mismatch" in str(e.value)
    with pytest.raises(errors.InvalidArgumentError):
        host_to_global_device_array({"x": np.ones((8,))})  # no mesh


def test_with_sharding_constraint(client):
    x = {"a": np.ones((8, 2))}
    assert with_sharding_constraint(x, placement.PartitionSpec("data")) is x  # no mesh
    one = Mesh(np.array(placement.devices()[:1]), ("data",))
    with one:
        assert with_sharding_constraint(x, placement.PartitionSpec("data")) is x
    with DeviceMeshManager().create_data_parallel_mesh():
        out = with_sharding_constraint(x, placement.PartitionSpec("data"))
        assert out["a"].sharding.spec == placement.PartitionSpec("data")
