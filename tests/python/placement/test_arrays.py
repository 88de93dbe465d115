"""Arrays and pytrees: every daemon dtype round-trips (bf16 via ml_dtypes),
scalars, nested pytrees, RemoteArray's surface, lifetime (delete, `with`,
garbage collection, Client.close) with device memory back to its baseline,
and chunked transfers above gRPC's 4 MiB message limit."""
import collections
import gc
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import placement
from placement import (DevicePlacement, Mesh, NamedSharding, PartitionSpec, RemoteArray,
                       SingleDeviceSharding, errors)

from conftest import wait_for_memory

DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.int16, np.int32,
          np.int64, np.uint8, np.bool_]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_round_trips(client, dtype):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((5, 7)) * 50).astype(dtype)
    r = placement.device_put(x, 3)
    assert r.dtype == np.dtype(dtype)
    back = np.asarray(r)
    assert back.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back.view(np.uint8), x.view(np.uint8))


def test_unsupported_dtype_names_the_supported_ones(client):
    with pytest.raises(errors.InvalidArgumentError) as e:
        placement.device_put(np.zeros(3, np.uint32))
    assert "uint32" in str(e.value) and "bfloat16" in str(e.value)
    with pytest.raises(errors.InvalidArgumentError):
        placement.device_put(np.zeros(3, np.complex64))


def test_big_endian_and_non_contiguous_inputs(client):
    x = np.arange(24, dtype=">i4").reshape(4, 6)
    np.testing.assert_array_equal(np.asarray(placement.device_put(x)), x)
    t = np.arange(24, dtype=np.float32).reshape(4, 6).T
    np.testing.assert_array_equal(np.asarray(placement.device_put(t)), t)


def test_scalars(client):
    for value, dtype in [(3, np.int64), (2.5, np.float64), (True, np.bool_),
                         (np.float32(1.5), np.float32)]:
        r = placement.device_put(value)
        assert r.shape == () and r.dtype == np.dtype(dtype)
        assert np.asarray(r) == value


Point = collections.namedtuple("Point", ["x", "y"])


def test_pytrees_keep_their_structure(client):
    tree = {"a": [np.ones(2), (np.zeros(3, np.int32), None)],
            "p": Point(x=np.arange(4), y=7.0),
            "o": collections.OrderedDict([("z", np.ones(1)), ("b", np.ones(1))]),
            "n": None}
    out = DevicePlacement().place_on_device(tree)
    assert isinstance(out["a"], list) and isinstance(out["a"][1], tuple)
    assert out["a"][1][1] is None and out["n"] is None
    assert isinstance(out["p"], Point) and isinstance(out["p"].x, RemoteArray)
    assert list(out["o"].keys()) == ["z", "b"]
    assert {t.name for t in client.tensors.list()} == {""}  # unnamed
    back = placement.api._tree.tree_map(np.asarray, out, is_leaf=lambda x: isinstance(x, RemoteArray))
    np.testing.assert_array_equal(back["p"].x, np.arange(4))
    assert float(back["p"].y) == 7.0
    assert DevicePlacement().place_on_device({}) == {}
    assert DevicePlacement().place_on_device([None]) == [None]


def test_remote_array_surface(client):
    mesh = Mesh(np.array(placement.devices()).reshape(2, 4), ("data", "model"))
    x = np.arange(8 * 12, dtype=np.float32).reshape(8, 12)
    r = placement.device_put(x, NamedSharding(mesh, PartitionSpec("data", "model")))
    assert r.shape == (8, 12) and r.ndim == 2 and r.size == 96 and r.nbytes == 384
    assert len(r) == 8 and r.dtype == np.float32
    assert r.sharding == NamedSharding(mesh, PartitionSpec("data", "model"))
    shards = r.addressable_shards
    assert len(shards) == 8
    assert shards[5].device.id == 5 and shards[5].index == (slice(4, 8), slice(3, 6))
    assert shards[5].shape == (4, 3)
    assert shards[5].replica_id == 0
    np.testing.assert_array_equal(shards[5].data, x[4:8, 3:6])
    np.testing.assert_array_equal(np.asarray(r, dtype=np.float64), x.astype(np.float64))
    text = repr(r)
    assert text.startswith("RemoteArray(f32[8,12], NamedSharding(mesh=Mesh('data': 2, "
                           "'model': 4, id=") and r.id in text
    single = placement.device_put(x, 6)
    assert single.sharding == SingleDeviceSharding(placement.devices()[6])
    replicated = placement.device_put(x, NamedSharding(mesh, PartitionSpec("data")))
    assert [s.replica_id for s in replicated.addressable_shards] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert replicated.addressable_shards[6].index == (slice(4, 8), slice(None))


def test_delete_and_context_manager_free_memory(client):
    x = np.ones((256, 256), np.float32)
    r = placement.device_put(x, 2)
    assert client.memory_in_use()[2] >= x.nbytes
    r.delete()
    assert r.is_deleted()
    assert client.memory_in_use()[2] == 0
    r.delete()  # no-op
    with pytest.raises(errors.FailedPreconditionError):
        np.asarray(r)
    with placement.device_put(x, 4) as inside:
        assert client.memory_in_use()[4] >= x.nbytes
    assert inside.is_deleted() and client.memory_in_use()[4] == 0


def test_garbage_collection_frees_memory(client):
    tree = placement.device_put({"a": np.ones((128, 128)), "b": np.ones(1000)}, 1)
    assert client.memory_in_use()[1] > 0
    del tree
    gc.collect()
    client.flush()
    assert wait_for_memory(client)[1] == 0


def test_keep_and_close(client, daemon):
    other = placement.Client(daemon.address)
    kept = placement.device_put(np.ones(100), 0, client=other).keep()
    owned = placement.device_put(np.ones(100), 0, client=other)
    other.close()  # deletes `owned`, leaves `kept`
    ids = {t.id for t in client.tensors.list()}
    assert kept.id in ids and owned.id not in ids
    client.delete_tensors([kept.id])


def test_transfers_above_the_message_limit(client):
    # 9 MiB + 12 bytes: nine full 1 MiB chunks and a short one, through one message limit of 4 MiB.
    x = np.random.default_rng(2).integers(0, 255, (9 << 20) + 12, dtype=np.uint8)
    r = placement.device_put(x, 0)
    np.testing.assert_array_equal(np.asarray(r), x)
    small = placement.Client(client.target, placement.TransportOptions(chunk_bytes=4096))
    r2 = placement.device_put(x[:100_003], 1, client=small)
    np.testing.assert_array_equal(np.asarray(r2), x[:100_003])
    r2.delete()
    small.close()


def test_errors_keep_code_and_message(client):
    with pytest.raises(errors.NotFoundError) as e:
        client.tensors.describe("t-missing")
    assert e.value.code.name == "NOT_FOUND" and "t-missing" in e.value.message
    assert isinstance(e.value, placement.PlacementError) and isinstance(e.value, LookupError)
    with pytest.raises(errors.ResourceExhaustedError) as e:
        placement.device_put(np.ones(80 << 20, np.uint8), 0)
    assert "cannot allocate" in str(e.value)


def test_works_without_jax():
    code = ("import sys; sys.modules['jax'] = None\n"
            "import numpy as np, placement, collections\n"
            "from placement import _tree\n"
            "assert _tree._jax_tree_util() is None\n"
            "P = collections.namedtuple('P', 'a b')\n"
            "t = {'x': [np.ones(2), None], 'p': P(np.zeros(1), 3)}\n"
            "out = placement.device_put(t)\n"
            "assert isinstance(out['p'], P) and out['x'][1] is None\n"
            "assert float(np.asarray(out['p'].b)) == 3\n"
            "placement.delete(out)\n")
    env = dict(os.environ, PLACEMENT_TARGET=placement.default_client().target)
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)


def test_one_client_from_many_threads(client):
    from concurrent.futures import ThreadPoolExecutor

    mesh = placement.DeviceMeshManager().create_data_parallel_mesh()

    def work(i):
        x = np.arange(8 * 1000, dtype=np.int32).reshape(8, 1000) * i
        tree = placement.DevicePlacement().shard_batch_dim({"x": x, "i": i}, mesh)
        moved = placement.device_put(tree, i % 8)
        ok = np.array_equal(np.asarray(moved["x"]), x) and int(np.asarray(moved["i"])) == i
        placement.delete([tree, moved])
        return ok

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(work, range(32)))
