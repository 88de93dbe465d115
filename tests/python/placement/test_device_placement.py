"""The seed's DevicePlacement surface, against a real daemon: enum and
dataclass, hardware detection, batch-size table and validate_batch_size's
four messages, device info, the four placement calls and the convenience
functions."""
import dataclasses

import numpy as np
import pytest

import placement
from placement import (BatchSizeRecommendation, DeviceMeshManager, DevicePlacement,
                       HardwareType, Mesh, NamedSharding, PartitionSpec, errors)

SEED_TABLE = {  # min, optimal, critical, notes (SEED_BEHAVIOUR.md)
    HardwareType.TPU_V5E: (64, 256, 240, "Critical batch size for reaching roofline on TPU v5e."),
    HardwareType.TPU_V5P: (128, 512, 480, "Higher throughput variant, benefits from larger batches."),
    HardwareType.TPU_V4: (64, 256, 192,
                          "Similar characteristics to TPU v5e but slightly lower critical batch."),
    HardwareType.H100: (64, 320, 298, "Critical batch size for reaching roofline on H100."),
    HardwareType.A100: (32, 256, 240, "A100 80GB variant. 40GB variant may need smaller batches."),
    HardwareType.V100: (16, 128, 96, "Older generation, memory-limited on 16GB variant."),
    HardwareType.CPU: (1, 32, 16,
                       "CPU is memory-bandwidth bound, smaller batches often sufficient."),
    HardwareType.UNKNOWN: (32, 128, 64, "Conservative defaults for unknown hardware."),
}


def test_hardware_type_values_are_the_seeds():
    assert [(m.name, m.value) for m in HardwareType][:8] == [
        ("TPU_V5E", "tpu_v5e"), ("TPU_V5P", "tpu_v5p"), ("TPU_V4", "tpu_v4"), ("H100", "h100"),
        ("A100", "a100"), ("V100", "v100"), ("CPU", "cpu"), ("UNKNOWN", "unknown")]


def test_batch_size_recommendation_is_a_frozen_dataclass_with_seed_defaults():
    rec = BatchSizeRecommendation(1, 2, 3)
    assert rec.max_memory_batch_size is None and rec.notes == ""
    assert [f.name for f in dataclasses.fields(rec)][:5] == [
        "min_batch_size", "optimal_batch_size", "critical_batch_size", "max_memory_batch_size",
        "notes"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.min_batch_size = 5


def test_detects_cpu_and_counts_devices(client):
    dp = DevicePlacement()
    assert dp.hardware_type is HardwareType.CPU
    assert dp.num_devices == 8


@pytest.mark.parametrize("hardware", list(SEED_TABLE))
def test_recommendation_table_is_the_seeds(client, hardware):
    rec = DevicePlacement().get_batch_size_recommendation(hardware)
    assert (rec.min_batch_size, rec.optimal_batch_size, rec.critical_batch_size,
            rec.notes) == SEED_TABLE[hardware]
    assert rec.max_memory_batch_size is None
    assert rec == placement.get_batch_size_recommendation(hardware)


def test_recommendation_defaults_to_detected_hardware_and_carries_roofline(client):
    assert DevicePlacement().get_batch_size_recommendation().critical_batch_size == 16
    h100 = placement.get_batch_size_recommendation(HardwareType.H100)
    assert h100.critical_batch_size == 298
    assert round(h100.roofline.critical_batch_size) == 295
    assert placement.get_batch_size_recommendation(HardwareType.H200).critical_batch_size == 64


@pytest.mark.parametrize("batch,warn,valid,message", [
    (0, True, False, "Batch size 0 is below minimum recommended 1 for cpu. "
                     "Performance will be significantly degraded."),
    (-3, True, False, "Batch size -3 is below minimum recommended 1 for cpu. "
                      "Performance will be significantly degraded."),
    (8, True, True, "Batch size 8 is below critical size 16 for cpu. "
                    "Consider increasing for optimal throughput."),
    (8, False, True, "Batch size 8 is acceptable for cpu."),
    (20, True, True, "Batch size 20 is acceptable for cpu."),
    (32, True, True, "Batch size 32 is optimal for cpu."),
    (256, True, True, "Batch size 256 is optimal for cpu."),
])
def test_validate_batch_size_seed_messages(client, batch, warn, valid, message):
    assert DevicePlacement().validate_batch_size(batch, warn_suboptimal=warn) == (valid, message)


def test_get_device_info(client):
    info = DevicePlacement().get_device_info()
    assert set(info) == {"num_devices", "hardware_type", "platforms", "device_kinds", "devices"}
    assert info["num_devices"] == 8 and info["hardware_type"] == "cpu"
    assert info["platforms"] == ["cpu"] and info["device_kinds"] == ["cpu"]
    assert info["devices"][3] == {"id": 3, "platform": "cpu", "device_kind": "cpu"}


def test_place_on_device_default_explicit_and_convenience(client):
    dp = DevicePlacement()
    data = {"x": np.arange(12, dtype=np.float32).reshape(3, 4), "n": None}
    placed = dp.place_on_device(data)
    assert placed["n"] is None
    assert placed["x"].sharding.device_id == 0
    np.testing.assert_array_equal(np.asarray(placed["x"]), data["x"])
    on5 = dp.place_on_device(data, device=client.devices()[5])
    assert on5["x"].sharding.device_id == 5
    moved = placement.place_on_device(on5, device=2)  # RemoteArray leaf: device to device
    assert moved["x"].sharding.device_id == 2
    np.testing.assert_array_equal(np.asarray(moved["x"]), data["x"])
    assert DevicePlacement(default_device=7).place_on_device(1.5).sharding.device_id == 7


def test_distribute_batch_seed_example(client):
    mesh = Mesh(np.array(placement.devices()), axis_names=("data",))
    data_sharding = NamedSharding(mesh, PartitionSpec("data", None))
    batch = {"images": np.ones((8, 28, 28, 3), np.float32), "labels": np.zeros((8,))}
    out = DevicePlacement().distribute_batch(batch, data_sharding)
    assert out["images"].sharding.spec == PartitionSpec("data", None)
    assert [s.index[0] for s in out["labels"].addressable_shards] == \
        [slice(i, i + 1) for i in range(8)]
    again = placement.distribute_batch(batch, data_sharding)
    np.testing.assert_array_equal(np.asarray(again["images"]), batch["images"])


def test_distribute_batch_indivisible_names_the_numbers(client):
    mesh = Mesh(np.array(placement.devices()), ("data",))
    with pytest.raises(errors.InvalidArgumentError) as e:
        placement.distribute_batch({"x": np.ones((10, 3))}, NamedSharding(mesh, PartitionSpec("data")))
    assert "size 10 is not divisible by 8" in str(e.value)


def test_replicate_across_devices_all_some_and_scalars(client):
    dp = DevicePlacement()
    weights = {"layer1": np.ones((784, 256), np.float32), "layer2": np.ones((256, 10), np.float32)}
    everywhere = dp.replicate_across_devices(weights)
    assert everywhere["layer1"].sharding.mesh.axis_names == ("replica",)
    assert len(everywhere["layer1"].addressable_shards) == 8
    two = dp.replicate_across_devices({"s": 3, "w": weights["layer2"]},
                                      devices=placement.devices()[:2])
    assert {s.device.id for s in two["w"].addressable_shards} == {0, 1}
    assert two["s"].shape == () and int(np.asarray(two["s"])) == 3
    assert two["w"].is_fully_replicated()


def test_shard_batch_dim_rules(client):
    dp = DevicePlacement()
    mesh = DeviceMeshManager().create_data_parallel_mesh()
    batch = {"images": np.ones((16, 4, 3), np.float32),
             "labels": np.zeros((16,), dtype=np.int32), "scale": 2.0}
    out = dp.shard_batch_dim(batch, mesh)
    assert out["images"].sharding.spec == PartitionSpec("data")
    assert out["labels"].addressable_shards[1].index == (slice(2, 4),)
    assert out["scale"].sharding.spec == PartitionSpec()  # rank 0: replicated
    last = dp.shard_batch_dim({"x": np.ones((3, 16))}, mesh, batch_axis=-1)
    assert last["x"].sharding.spec == PartitionSpec(None, "data")
    beyond = dp.shard_batch_dim({"x": np.ones((16,))}, mesh, batch_axis=3)
    assert beyond["x"].is_fully_replicated()
    with pytest.raises(errors.InvalidArgumentError) as e:
        dp.shard_batch_dim({"x": np.ones((12, 2))}, mesh)
    assert "12" in str(e.value) and "8" in str(e.value)
    with pytest.raises(errors.InvalidArgumentError):
        dp.shard_batch_dim({"x": np.ones((16, 2))}, mesh, mesh_axis="model")


def test_group_is_all_or_nothing(client):
    mesh = Mesh(np.array(placement.devices()), ("data",))
    with pytest.raises(errors.InvalidArgumentError) as e:
        placement.distribute_batch({"a": np.ones((8,)), "b": np.ones((6,))},
                                   NamedSharding(mesh, PartitionSpec("data")))
    assert "'b'" in str(e.value)
    assert client.tensors.list() == []
