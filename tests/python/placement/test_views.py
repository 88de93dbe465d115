"""Zero-copy shard views from Python (docs/api/views.md, docs/python.md):
np.asarray(x) and x.addressable_shards[i].data are read-only arrays over the
daemon's memory for every dtype, sharded and replicated, equal to a
download; a write raises (numpy) or faults (a raw pointer, in a child
process) while the daemon serves on; an export lasts while its arrays do and
holds a deleted tensor's memory until they go; 'stream' clients and small
arrays download; to_jax reads through a view; `placectl top` shows the
open views."""
import ctypes
import faulthandler
import gc
import os
import signal
import subprocess

import ml_dtypes
import numpy as np
import pytest

import placement
from placement import Mesh, NamedSharding, PartitionSpec, TransportOptions, errors, views

from conftest import wait_for_memory

DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.int16, np.int32,
          np.int64, np.uint8, np.bool_]
MIB = 1 << 20


def open_exports(client):
    gc.collect()
    client.flush()
    return len(views.list_exports(client)[0])


def sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 50).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_views_of_every_dtype_sharded_and_replicated_equal_the_download(client, dtype):
    mesh = Mesh(np.arange(4), ("data",))
    x = sample(dtype, (512, 1024 // np.dtype(dtype).itemsize * 2))  # 1 MiB, 256 KiB shards
    for sharding in (NamedSharding(mesh, PartitionSpec("data")),
                     NamedSharding(mesh, PartitionSpec())):
        r = placement.device_put(x, sharding)
        whole = np.asarray(r)  # sharded: assembled here; replicated: a replica's view
        assert not whole.flags.writeable
        np.testing.assert_array_equal(whole.view(np.uint8), x.view(np.uint8))
        np.testing.assert_array_equal(r.to_numpy().view(np.uint8), x.view(np.uint8))
        for shard in r.addressable_shards:
            data = shard.data
            assert not data.flags.writeable and data.shape == shard.shape
            np.testing.assert_array_equal(data.view(np.uint8), x[shard.index].view(np.uint8))
        del whole, data
        r.delete()
    assert open_exports(client) == 0


def test_a_lone_shard_is_the_view_itself_and_lives_with_its_array(client):
    x = np.arange(MIB, dtype=np.float32)
    r = placement.device_put(x, 5)
    a = np.asarray(r)
    b = np.asarray(r)
    base = a
    while isinstance(base, np.ndarray):
        base = base.base
    assert isinstance(base, memoryview)  # the mapping, not a copy
    del base
    exports, made, exposed = views.list_exports(client)
    assert len(exports) == 2 and exports[0].reader_pid == os.getpid()
    assert made >= 2 and exposed >= 2 * x.nbytes
    del a
    assert open_exports(client) == 1
    del b
    assert open_exports(client) == 0
    r.delete()


def test_a_write_raises_here_and_faults_through_a_pointer(client, daemon):
    x = np.arange(MIB // 4, dtype=np.int32)
    r = placement.device_put(x, 1)
    a = np.asarray(r)
    with pytest.raises(ValueError):
        a[0] = 7
    pid = os.fork()
    if pid == 0:
        faulthandler.disable()  # the fault is the point: no report from the child
        ctypes.memset(a.ctypes.data, 1, 1)  # must fault: the mapping is PROT_READ
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSEGV
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(r.to_numpy(), x)  # the daemon serves on
    del a
    r.delete()


def test_a_deleted_tensor_stays_counted_while_its_view_lives(client):
    before = wait_for_memory(client)
    x = np.arange(2 * MIB, dtype=np.uint8)
    r = placement.device_put(x, 2)
    held = client.memory_in_use()
    a = np.asarray(r)
    r.delete()
    client.flush()
    assert client.memory_in_use() == held
    np.testing.assert_array_equal(a, x)
    del a
    gc.collect()
    client.flush()
    assert wait_for_memory(client, before) == before


def test_streams_and_small_arrays_download(client, daemon):
    stream = placement.Client(client.target, TransportOptions(transfer_path="stream"))
    try:
        r = placement.device_put(np.arange(MIB, dtype=np.uint8), 0, client=stream)
        a = np.asarray(r)
        assert a.flags.writeable and open_exports(stream) == 0
        r.delete()
    finally:
        stream.close()
    small = placement.device_put(np.arange(100, dtype=np.uint8), 0)
    assert np.asarray(small).flags.writeable and open_exports(client) == 0
    small.delete()


def test_the_view_api_selects_shards_and_assembles(client):
    mesh = Mesh(np.arange(4), ("data",))
    x = sample(np.float32, (64, 4096), 3)
    r = placement.device_put(x, NamedSharding(mesh, PartitionSpec("data")))
    with views.view(r, [2, 0]) as v:
        assert [s.shard_index for s in v.shards] == [2, 0]
        np.testing.assert_array_equal(v.arrays[0], x[32:48])
        with pytest.raises(errors.FailedPreconditionError):
            v.assemble()  # two of four shards
    with views.view(r) as v:
        np.testing.assert_array_equal(v.assemble(), x)
    with pytest.raises(errors.InvalidArgumentError) as e:
        views.view(r, [4])
    assert "shard_indices[0] = 4 is out of range" in str(e.value)
    assert open_exports(client) == 0
    r.delete()


def test_to_jax_reads_through_a_view(client):
    jax = pytest.importorskip("jax")
    from placement import jax_bridge

    mesh = Mesh(np.arange(4), ("data",))
    x = sample(np.float32, (256, 1024), 4)
    r = placement.device_put(x, NamedSharding(mesh, PartitionSpec("data")))
    j = jax_bridge.to_jax(r)
    np.testing.assert_array_equal(np.asarray(j), x)
    assert len(j.addressable_shards) == 4
    del j
    gc.collect()
    assert open_exports(client) == 0
    r.delete()
    del jax


def test_top_shows_the_open_views(client, daemon):
    placectl = os.environ.get("PLACECTL_BIN")
    if not placectl:
        pytest.skip("PLACECTL_BIN is not set (run through ctest)")
    r = placement.device_put(np.zeros(MIB // 4, np.float32), 4)
    a = np.asarray(r)
    # The view is the client's session's: placectl joins it to see it.
    top = subprocess.run([placectl, "--target", daemon.address, "--session", client.session_id,
                          "top", "--once"], capture_output=True, text=True, timeout=60)
    assert top.returncode == 0, top.stderr
    assert "views: 1 open (1.0 MiB viewed in place)" in top.stdout, top.stdout
    del a
    r.delete()


def view_batches(n, rows=256):
    """Item i: "x" 1 MiB of f32 (a block of its own: viewed in place),
    "y" a small i32 array (a private copy)."""
    for i in range(n):
        yield {"x": np.arange(rows * 1024, dtype=np.float32).reshape(rows, 1024) + i,
               "y": np.full((rows,), i, np.int32)}


def mapping_of(a):
    base = a
    while isinstance(base, np.ndarray):
        base = base.base
    return base


def test_prefetch_view_batches_read_the_daemon_memory_in_place(client):
    it = placement.DevicePlacement().prefetch_to_device(view_batches(8), buffer_size=2,
                                                        views=True)
    kept = None
    for i, batch in enumerate(it):
        x = np.asarray(batch["x"])
        assert not x.flags.writeable
        assert isinstance(mapping_of(x), memoryview)  # the mapping, not a copy
        np.testing.assert_array_equal(x, np.arange(256 * 1024, dtype=np.float32).reshape(256, 1024) + i)
        np.testing.assert_array_equal(np.asarray(batch["y"]), np.full((256,), i, np.int32))
        np.testing.assert_array_equal(batch["x"].addressable_shards[0].data, x)
        if i == 0:
            kept = x
        del x
    assert i == 7 and it.stats.batches_staged == 8
    # Batch 0 was released seven batches ago and the stream has ended: the
    # array kept from it still reads batch 0, its memory still counted.
    np.testing.assert_array_equal(kept, np.arange(256 * 1024, dtype=np.float32).reshape(256, 1024))
    assert client.memory_in_use()[0] >= MIB
    del kept, batch
    assert open_exports(client) == 0
    assert wait_for_memory(client)[0] == 0


def test_prefetch_view_batches_sharded(client):
    mesh = Mesh(np.arange(4), ("data",))
    sharding = NamedSharding(mesh, PartitionSpec("data"))
    it = placement.DevicePlacement().prefetch_to_device(view_batches(4), sharding, 3, views=True)
    for i, batch in enumerate(it):
        want = np.arange(256 * 1024, dtype=np.float32).reshape(256, 1024) + i
        np.testing.assert_array_equal(np.asarray(batch["x"]), want)  # assembled here
        for shard in batch["x"].addressable_shards:
            data = shard.data
            assert not data.flags.writeable and isinstance(mapping_of(data), memoryview)
            np.testing.assert_array_equal(data, want[shard.index])
        del data, shard  # a shard refers to its array, and so to the batch's view
    del batch
    assert open_exports(client) == 0
    assert set(wait_for_memory(client).values()) == {0}


def test_prefetch_view_batches_closed_mid_stream_leave_nothing(client):
    it = placement.DevicePlacement().prefetch_to_device(view_batches(100), buffer_size=3,
                                                        views=True)
    first = next(it)
    x = np.asarray(first["x"])
    next(it)
    it.close()
    with pytest.raises(errors.CancelledError):
        next(it)
    np.testing.assert_array_equal(x[0, :4], np.arange(4, dtype=np.float32))  # still readable
    del first, x
    assert open_exports(client) == 0
    assert wait_for_memory(client)[0] == 0


def test_prefetch_without_views_or_over_a_stream_client_opens_no_export(client):
    it = placement.DevicePlacement().prefetch_to_device(view_batches(2), buffer_size=2)
    for batch in it:
        assert np.asarray(batch["x"]).flags.writeable  # downloaded
        assert open_exports(client) == 0
    stream = placement.Client(client.target, TransportOptions(transfer_path="stream"))
    try:
        from placement.prefetch import PrefetchIterator
        it = PrefetchIterator(stream, view_batches(2), None, 2, views=True)
        for batch in it:
            assert np.asarray(batch["x"]).flags.writeable
            assert open_exports(stream) == 0
        del batch
    finally:
        stream.close()


def test_dlpack_consumers_read_the_view(client):
    x = np.arange(MIB, dtype=np.float32)
    r = placement.device_put(x, 3)
    assert r.__dlpack_device__() == (1, 0)
    # numpy speaks DLPack 1.0: the read-only view itself, no copy.
    a = np.from_dlpack(r)
    assert not a.flags.writeable
    np.testing.assert_array_equal(a, x)
    assert open_exports(client) == 1  # the capsule's array holds the export
    del a
    assert open_exports(client) == 0
    # A pre-1.0 consumer (JAX 0.10 asks without max_version) gets a copy.
    import jax
    j = jax.dlpack.from_dlpack(r)
    np.testing.assert_array_equal(np.asarray(j), x)
    with pytest.raises(BufferError, match="read-only"):
        r.__dlpack__(copy=False)
    del j
    assert open_exports(client) == 0
    r.delete()
