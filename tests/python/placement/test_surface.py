"""The public surface speaks Python: dataclasses for what the daemon
reports (TensorInfo -- also from Client.tensor_info and list_tensors --,
DaemonStatus, PrefetchStats, RegionInfo, streams),
create_mesh from Python values, errors in Python's words, progress=
callbacks, and names where ids are taken."""
import dataclasses
import datetime

import numpy as np
import pytest

import placement
from placement import NamedSharding, PartitionSpec, errors, types
from placement.regions import list_regions


def test_tensor_info_is_a_dataclass(client):
    mesh = client.create_mesh({"data": 4}, mesh_id="surface-4")
    x = placement.device_put(np.arange(8, dtype=np.int32), NamedSharding(mesh, PartitionSpec("data")))
    info = x.info
    assert dataclasses.is_dataclass(info) and isinstance(info, types.TensorInfo)
    assert (info.dtype, info.shape, info.mesh_id, info.spec) == (np.dtype(np.int32), (8,),
                                                                  "surface-4", ("data",))
    assert info.device_id is None and not info.padded
    assert [s.index for s in info.shards] == [(slice(0, 2),), (slice(2, 4),), (slice(4, 6),),
                                              (slice(6, 8),)]
    assert info.shards[1].device_id == 1 and info.shards[1].size_bytes == 8
    x.delete()


def test_tensor_info_and_list_tensors_are_dataclasses(client):
    x = placement.device_put(np.arange(6, dtype=np.float32), 1)
    y = client.tensors.upload(np.arange(4, dtype=np.int8), placement._placing.device_rule(2),
                              name="surface-listed")  # the wire layer: a message
    info = client.tensor_info("surface-listed")
    assert isinstance(info, types.TensorInfo) and info.id == y.id and info.device_id == 2
    assert (info.dtype, info.shape, info.name) == (np.dtype(np.int8), (4,), "surface-listed")
    assert client.tensor_info(x.id) == x.info
    listed = client.list_tensors(name_prefix="surface-")
    assert [t.id for t in listed] == [y.id] and isinstance(listed[0], types.TensorInfo)
    assert {x.id, y.id} <= {t.id for t in client.list_tensors()}
    with pytest.raises(errors.NotFoundError):
        client.tensor_info("surface-nothing")
    x.delete()
    client.delete_tensors([y.id])


def test_regions_are_dataclasses(client):
    with placement.SharedRegion(1 << 20, "surface", client=client) as region:
        listed = [r for r in list_regions(client) if r.id == region.id]
        assert len(listed) == 1 and isinstance(listed[0], types.RegionInfo)
        assert dataclasses.is_dataclass(listed[0])
        assert (listed[0].name, listed[0].size_bytes) == ("surface", 1 << 20)


def test_status_and_streams_are_dataclasses(client):
    status = client.status()
    assert isinstance(status, types.DaemonStatus)
    assert isinstance(status.uptime, datetime.timedelta) and status.uptime.total_seconds() >= 0
    assert isinstance(status.start_time, datetime.datetime)
    assert status.cluster.state == "single" and status.cluster.num_processes == 1
    assert status.num_devices == 8
    assert client.streams() == []  # nothing in flight
    trim = client.trim_memory()  # every tenant's: authentication is off
    assert isinstance(trim, types.MemoryTrim)
    assert trim.cache_bytes_released >= 0 and trim.resident_bytes_before > 0
    with pytest.raises(errors.NotFoundError, match="tenant 'team-z' has never held memory"):
        client.trim_memory("team-z")


def test_create_mesh_takes_python_values(client):
    mesh = client.create_mesh([("data", 2), ("model", 2)], devices=[3, 2, 1, 0])
    assert mesh.shape == {"data": 2, "model": 2}
    assert mesh.device_ids.tolist() == [[3, 2], [1, 0]]
    with pytest.raises(errors.FailedPreconditionError) as e:
        client.create_mesh({"data": 16})
    assert str(e.value) == "Not enough devices: mesh requires 16 devices but only 8 available."


def test_uneven_split_error_in_python_words(client):
    mesh = client.create_mesh({"data": 4})
    with pytest.raises(errors.InvalidArgumentError) as e:
        placement.device_put(np.ones(6, np.float32), NamedSharding(mesh, PartitionSpec("data")))
    assert "use NamedSharding(mesh, spec, padded=True) for uneven shards" in str(e.value)
    assert "SHARDING_MODE" not in str(e.value) and "::" not in str(e.value)


def test_progress_callbacks_see_every_byte(client):
    seen = []
    data = np.ones(3 << 20, np.uint8)
    for path in ["stream", "region"]:
        seen.clear()
        c = placement.Client(client.target, placement.TransportOptions(transfer_path=path))
        x = placement.device_put(data, 0, client=c, progress=lambda d, t: seen.append((d, t)))
        assert seen[-1] == (data.nbytes, data.nbytes), path
        assert all(t == data.nbytes for _, t in seen)
        assert [d for d, _ in seen] == sorted(d for d, _ in seen)
        assert sum(1 for d, _ in seen if d == data.nbytes) == 1
        if path == "stream":
            assert len(seen) >= 3  # 1 MiB chunks
        seen.clear()
        back = x.to_numpy(progress=lambda d, t: seen.append((d, t)))
        np.testing.assert_array_equal(back, data)
        assert seen[-1] == (data.nbytes, data.nbytes), path
        x.delete()
        c.close()
    with pytest.raises(errors.InvalidArgumentError, match="progress must be a callable"):
        placement.device_put(data, 0, progress="yes")


def test_progress_true_draws_a_tqdm_bar(client, capsys):
    pytest.importorskip("tqdm")
    stream = placement.Client(client.target, placement.TransportOptions(transfer_path="stream"))
    x = placement.device_put(np.ones(2 << 20, np.uint8), 0, client=stream, progress=True)
    x.delete()
    stream.close()
    err = capsys.readouterr().err
    assert "device_put" in err and "2.00M" in err  # tqdm's bar on stderr


def test_names_resolve_where_ids_are_taken(client):
    a = placement.device_put({"images": np.arange(4, dtype=np.float32)}, 0)["images"]
    named = client.tensors.place([a.id], placement._placing.device_rule(1), name="img2")[0]
    assert named.name == "img2"
    b = placement.lookup("img2")
    assert b.id == named.id and b.name == "img2"
    assert client.tensors.describe("img2").id == b.id
    np.testing.assert_array_equal(client.tensors.download("img2")[1], np.arange(4))
    # A derived result: "<name>:place"; a second one makes the name ambiguous.
    derived = client.tensors.place(["img2"], placement._placing.device_rule(2))[0]
    assert derived.name == "img2:place"
    c = placement.RemoteArray(client, derived)
    twin = placement.RemoteArray(
        client, client.tensors.place(["img2"], placement._placing.device_rule(3))[0])
    with pytest.raises(errors.FailedPreconditionError) as e:
        client.tensors.describe("img2:place")
    assert "is the name of 2 tensors" in str(e.value) and c.id in str(e.value)
    for r in (a, b, c, twin):
        r.delete()
