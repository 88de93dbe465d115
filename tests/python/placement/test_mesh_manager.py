"""The seed's DeviceMeshManager against a real daemon: dict and list forms,
presets, the seed's error text, explicit devices, get_mesh_info."""
import numpy as np
import pytest

import placement
from placement import DeviceMeshManager, Mesh, errors


def test_properties(client):
    manager = DeviceMeshManager()
    assert manager.num_devices == 8
    assert [d.id for d in manager.devices] == list(range(8))


def test_dict_and_list_forms_mean_the_same(client):
    manager = DeviceMeshManager()
    mesh_dict = manager.create_device_mesh({"data": 2, "model": 1})
    mesh_list = manager.create_device_mesh([("data", 2), ("model", 1)])
    assert mesh_dict == mesh_list
    assert mesh_dict.axis_names == ("data", "model")
    assert dict(mesh_dict.shape) == {"data": 2, "model": 1}
    assert mesh_dict.id and mesh_list.id and mesh_dict.id != mesh_list.id


def test_presets(client):
    manager = DeviceMeshManager()
    dp = manager.create_data_parallel_mesh()
    assert dict(dp.shape) == {"data": 8}
    batch = manager.create_data_parallel_mesh(num_devices=4, axis_name="batch")
    assert dict(batch.shape) == {"batch": 4} and batch.device_ids.tolist() == [0, 1, 2, 3]
    model = manager.create_model_parallel_mesh(num_devices=2, axis_name="model")
    assert dict(model.shape) == {"model": 2}
    assert dict(manager.create_model_parallel_mesh().shape) == {"model": 8}
    hybrid = manager.create_hybrid_mesh(data_parallel_size=2, model_parallel_size=4,
                                        data_axis="data", model_axis="model")
    assert hybrid.device_ids.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]  # k at (k // mp, k % mp)
    assert dict(manager.create_hybrid_mesh().shape) == {"data": 1, "model": 1}
    assert manager.get_mesh_info(hybrid) == {"total_devices": 8, "axes": {"data": 2, "model": 4}}


def test_not_enough_devices_is_the_seeds_value_error(client):
    manager = DeviceMeshManager()
    with pytest.raises(ValueError) as e:
        manager.create_device_mesh({"data": 4, "model": 4})
    assert str(e.value) == "Not enough devices: mesh requires 16 devices but only 8 available."
    assert isinstance(e.value, errors.FailedPreconditionError)
    with pytest.raises(ValueError) as e:
        manager.create_data_parallel_mesh(num_devices=9)
    assert str(e.value) == "Not enough devices: mesh requires 9 devices but only 8 available."


def test_explicit_devices(client):
    manager = DeviceMeshManager(devices=placement.devices()[4:])
    assert manager.num_devices == 4
    mesh = manager.create_device_mesh({"data": 2, "model": 2})
    assert mesh.device_ids.tolist() == [[4, 5], [6, 7]]
    assert manager.create_data_parallel_mesh().device_ids.tolist() == [4, 5, 6, 7]
    with pytest.raises(ValueError) as e:
        manager.create_hybrid_mesh(4, 2)
    assert str(e.value) == "Not enough devices: mesh requires 8 devices but only 4 available."
    picked = manager.create_device_mesh({"x": 2}, devices=[7, 0])
    assert picked.device_ids.tolist() == [7, 0]
    with pytest.raises(errors.NotFoundError):
        DeviceMeshManager(devices=[0, 42])
    with pytest.raises(errors.InvalidArgumentError):
        DeviceMeshManager(devices=[1, 1])


def test_sizes_below_one_are_rejected(client):
    manager = DeviceMeshManager()
    with pytest.raises(errors.InvalidArgumentError) as e:
        manager.create_device_mesh({"data": -1})
    assert "sizes must be >= 1" in str(e.value)
    with pytest.raises(errors.InvalidArgumentError):
        manager.create_data_parallel_mesh(num_devices=0)
    with pytest.raises(errors.InvalidArgumentError):
        manager.create_device_mesh({"data": 2, "data2": 0})


def test_get_mesh_info_of_a_local_mesh(client):
    mesh = Mesh(np.array(placement.devices()).reshape(2, 4), ("data", "model"))
    assert DeviceMeshManager().get_mesh_info(mesh) == {"total_devices": 8,
                                                       "axes": {"data": 2, "model": 4}}
    assert mesh.id is None
    assert client.mesh_id(mesh) == client.mesh_id(Mesh(np.arange(8).reshape(2, 4),
                                                       ("data", "model")))
