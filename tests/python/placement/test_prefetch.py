"""prefetch_to_device over the daemon's Prefetch stream: order, every item
once, at most buffer_size held, errors at their position, cancellation and
garbage collection freeing every staged batch."""
import dataclasses
import datetime
import gc
import threading

import numpy as np
import pytest

import placement
from placement import DeviceMeshManager, DevicePlacement, NamedSharding, PartitionSpec, errors, types

from conftest import wait_for_memory

BATCH = (32, 784)
BATCH_BYTES = 32 * 784 * 4


def batches(n, *, fail_at=None):
    for i in range(n):
        if i == fail_at:
            raise ValueError(f"source broke at {i}")
        yield {"batch": np.ones(BATCH, np.float32) * i, "step": np.int32(i)}


def test_order_every_item_once_and_the_buffer_bound(client):
    seen = []
    peak = 0
    it = DevicePlacement().prefetch_to_device(batches(20), buffer_size=2)
    for batch in it:
        assert batch["batch"].sharding.device_id == 0
        seen.append(int(np.asarray(batch["step"])))
        assert float(np.asarray(batch["batch"])[0, 0]) == seen[-1]
        peak = max(peak, client.memory_in_use()[0])
    assert seen == list(range(20))
    assert peak <= 2 * (BATCH_BYTES + 4 + 4096)  # at most buffer_size batches held
    assert it.stats.batches_staged == 20 and it.stats.max_batches_held <= 2
    # A dataclass of Python values, not the wire message.
    assert isinstance(it.stats, types.PrefetchStats) and dataclasses.is_dataclass(it.stats)
    assert isinstance(it.stats.consumer_stall, datetime.timedelta)
    assert isinstance(it.stats.producer_blocked, datetime.timedelta)
    assert it.stats.bytes_staged >= 20 * BATCH_BYTES
    with pytest.raises(StopIteration):
        next(it)


@pytest.mark.parametrize("buffer_size", [1, 3])
def test_other_buffer_sizes(client, buffer_size):
    it = DevicePlacement().prefetch_to_device(batches(6), buffer_size=buffer_size)
    assert [int(np.asarray(b["step"])) for b in it] == list(range(6))
    assert it.stats.max_batches_held <= buffer_size


def test_sharded_batches(client):
    mesh = DeviceMeshManager().create_data_parallel_mesh()
    sharding = NamedSharding(mesh, PartitionSpec("data"))
    it = DevicePlacement().prefetch_to_device(
        ({"x": np.arange(16 * 2).reshape(16, 2) + i} for i in range(3)), device=sharding)
    for i, batch in enumerate(it):
        assert batch["x"].sharding.spec == PartitionSpec("data")
        np.testing.assert_array_equal(np.asarray(batch["x"]), np.arange(32).reshape(16, 2) + i)


def test_source_error_reaches_the_consumer_at_its_position(client):
    it = DevicePlacement().prefetch_to_device(batches(10, fail_at=3))
    got = [int(np.asarray(next(it)["step"])) for _ in range(3)]
    assert got == [0, 1, 2]
    with pytest.raises(ValueError, match="source broke at 3"):
        next(it)
    with pytest.raises(ValueError):
        next(it)  # stays failed


def test_daemon_error_at_its_position(client):
    mesh = DeviceMeshManager().create_data_parallel_mesh()
    source = [{"x": np.ones((8, 2))}, {"x": np.ones((8, 2))}, {"x": np.ones((6, 2))}]
    it = DevicePlacement().prefetch_to_device(iter(source),
                                              device=NamedSharding(mesh, PartitionSpec("data")))
    next(it)
    next(it)
    with pytest.raises(errors.InvalidArgumentError) as e:
        next(it)
    assert str(e.value).startswith("batch 2:") and "not divisible by 8" in str(e.value)


def test_empty_source_and_bad_buffer_size(client):
    it = DevicePlacement().prefetch_to_device(iter([]))
    assert list(it) == []
    assert it.stats.batches_staged == 0
    with pytest.raises(errors.InvalidArgumentError) as e:
        DevicePlacement().prefetch_to_device(batches(1), buffer_size=-1)
    assert str(e.value) == "buffer_size is -1; must be >= 1 (0 selects the default 2)"


def test_close_mid_stream_frees_everything(client):
    produced = []

    def endless():
        i = 0
        while True:
            produced.append(i)
            yield {"batch": np.full(BATCH, i, np.float32)}
            i += 1

    it = DevicePlacement().prefetch_to_device(endless(), buffer_size=3)
    first = next(it)
    second = next(it)
    assert client.memory_in_use()[0] >= BATCH_BYTES
    it.close()
    assert not it._thread.is_alive()
    with pytest.raises(errors.CancelledError):
        next(it)
    assert wait_for_memory(client)[0] == 0  # staged and in-flight batches freed
    del first, second
    assert len(produced) <= 3 + 2 + 2  # the producer stopped on the credit


def test_garbage_collected_iterator_frees_everything(client):
    with DevicePlacement().prefetch_to_device(batches(100), buffer_size=2) as it:
        next(it)
    assert wait_for_memory(client)[0] == 0
    it2 = DevicePlacement().prefetch_to_device(batches(100), buffer_size=2)
    next(it2)
    thread = it2._thread
    del it2
    gc.collect()
    assert wait_for_memory(client)[0] == 0
    thread.join(timeout=30)
    assert not thread.is_alive()


def test_consumer_in_another_thread_and_slow_producer(client):
    def slow():
        for i in range(5):
            threading.Event().wait(0.01)
            yield {"v": np.int64(i)}

    out = []
    it = DevicePlacement().prefetch_to_device(slow(), device=placement.devices()[4])
    worker = threading.Thread(target=lambda: out.extend(int(np.asarray(b["v"])) for b in it))
    worker.start()
    worker.join(timeout=60)
    assert out == [0, 1, 2, 3, 4]


def test_stream_deadline(client, daemon):
    hurried = placement.Client(daemon.address, placement.TransportOptions(stream_timeout=0.3))

    def slow():
        yield {"x": np.ones(4)}
        threading.Event().wait(2)
        yield {"x": np.ones(4)}

    it = DevicePlacement(client=hurried).prefetch_to_device(slow())
    next(it)
    with pytest.raises(errors.DeadlineExceededError):
        next(it)
    hurried.close()
    assert wait_for_memory(client)[0] == 0
