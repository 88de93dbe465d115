"""Uploads written in place (placement._inplace, docs/python.md "Uploads
written in place"): against the suite's same-host CPU daemon, device_put of
1 MiB or more writes the shards straight into the daemon's memory and round
trips byte for byte -- one device, a 2x2 mesh sharded both ways, replicated,
a padded sharding with an empty shard, boxes large enough to be copied on
threads (contiguous and strided) -- with progress slot by slot; the
next upload after a delete writes through the mapping kept from the one
before; small arrays and forced paths stay staged; INPLACE raises
FailedPreconditionError where the daemon cannot (shards under 256 KiB, no
region socket, an older daemon) and AUTO falls back, remembering only what
lasts; an error while writing cancels the reservation and frees its memory;
the mapping cache keeps to its bound; a restarted daemon gets the upload
and the old mappings go; fresh daemon memory is filled through its fd. The
MappingCache, the fill of a file with no pages and the slot layout are also
checked on memfds of this process, without the daemon."""
import os

import numpy as np
import pytest

import placement
from placement import Mesh, NamedSharding, PartitionSpec, TransportOptions, errors
from placement import _mapping_cache, _inplace, _placing
from placement.testing import LocalDaemon
from placement.v1 import types_pb2
from placement.v1 import view_service_pb2 as vpb

from conftest import wait_for_memory

MIB = 1 << 20


def stats(client):
    return client.tensors.inplace.stats()


def sample(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 50).astype(dtype)


def mesh_2x2():
    return Mesh(np.arange(4).reshape(2, 2), ("data", "model"))


# --- Against the daemon -------------------------------------------------------------

def test_a_single_device_upload_is_written_in_place_and_round_trips(client):
    x = sample((1024, 1024))  # 4 MiB
    before = stats(client)
    r = placement.device_put(x, 2)
    after = stats(client)
    assert after.uploads == before.uploads + 1, after
    assert after.off is None
    assert r.shape == x.shape and r.dtype == x.dtype
    np.testing.assert_array_equal(r.to_numpy(), x)
    r.delete()


@pytest.mark.parametrize("spec", [PartitionSpec("data", "model"), PartitionSpec("model"),
                                  PartitionSpec()], ids=["both-axes", "model", "replicated"])
def test_mesh_layouts_round_trip(client, spec):
    x = sample((1024, 2048), seed=1)  # 8 MiB; 2 MiB shards when split both ways
    before = stats(client)
    r = placement.device_put(x, NamedSharding(mesh_2x2(), spec))
    assert stats(client).uploads == before.uploads + 1
    np.testing.assert_array_equal(r.to_numpy(), x)
    shards = r.addressable_shards
    assert len(shards) == 4
    for shard in shards:
        np.testing.assert_array_equal(np.asarray(shard.data), x[shard.index])
    del shards, shard
    r.delete()


@pytest.mark.parametrize("spec", [PartitionSpec("model"), PartitionSpec(None, "model")],
                         ids=["rows-contiguous", "columns-strided"])
def test_large_boxes_are_copied_on_threads_either_way(client, spec):
    # 32 MiB over 2 devices: 16 MiB boxes, past copy_box's 8 MiB thread
    # threshold; split by columns, each box of the array is strided, so
    # the upload copies runs of rows on the threads.
    x = sample((2048, 4096), seed=6)
    mesh = Mesh(np.arange(2), ("model",))
    before = stats(client)
    r = placement.device_put(x, NamedSharding(mesh, spec))
    assert stats(client).uploads == before.uploads + 1
    np.testing.assert_array_equal(r.to_numpy(), x)
    out = np.empty_like(x)  # a caller's array, read into in place
    r.to_numpy(out=out)
    np.testing.assert_array_equal(out, x)
    r.delete()


def test_a_padded_sharding_with_an_empty_shard_round_trips(client):
    x = sample((6, 65536), seed=5)  # 4 ways padded: 2 + 2 + 2 + 0 rows, 512 KiB shards
    before = stats(client)
    r = placement.device_put(x, NamedSharding(Mesh(np.arange(4), ("data",)),
                                              PartitionSpec("data"), padded=True))
    assert stats(client).uploads == before.uploads + 1
    assert [s.shape[0] for s in r.addressable_shards] == [2, 2, 2, 0]
    np.testing.assert_array_equal(r.to_numpy(), x)
    r.delete()


def test_progress_is_told_slot_by_slot(client):
    x = sample((512, 1024))  # 2 MiB, replicated on 4 devices: 4 slots
    seen = []
    r = placement.device_put(x, NamedSharding(Mesh(np.arange(4), ("data",)), PartitionSpec()),
                             progress=lambda done, total: seen.append((done, total)))
    assert stats(client).off is None
    assert len(seen) >= 4, seen  # three slots' shares before the end, and the end
    assert all(total == x.nbytes for _, total in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert seen[-1] == (x.nbytes, x.nbytes) and [d for d, _ in seen].count(x.nbytes) == 1
    np.testing.assert_array_equal(r.to_numpy(), x)
    r.delete()


def test_progress_moves_within_one_slot(client, monkeypatch):
    # Pieces of 1 MiB (64 MiB in use): a 4 MiB single-device upload reports
    # after every piece, into fresh daemon memory and again into kept memory.
    from placement import _progress
    monkeypatch.setattr(_progress, "PIECE_BYTES", MIB)
    x = sample((1024, 1024), seed=9)
    for _ in range(2):
        seen = []
        r = placement.device_put(x, 1, progress=lambda done, total: seen.append((done, total)))
        assert [d for d, _ in seen] == [MIB, 2 * MIB, 3 * MIB, 4 * MIB], seen
        np.testing.assert_array_equal(r.to_numpy(), x)
        r.delete()


def test_the_next_upload_after_a_delete_writes_through_the_kept_mapping(client):
    x = sample((1024, 1024), seed=2)
    r = placement.device_put(x, 3)
    r.delete()
    before = stats(client)
    y = x + 1
    r = placement.device_put(y, 3)
    after = stats(client)
    assert after.uploads == before.uploads + 1
    assert after.cache.hits > before.cache.hits, after  # the freed block came back
    assert after.cache.misses == before.cache.misses, after  # and nothing was mapped anew
    np.testing.assert_array_equal(r.to_numpy(), y)
    r.delete()


def small_shared_pages_only() -> bool:
    """Whether the host gives shared memory 4 KiB pages only: then the daemon
    leaves an in-place reservation's fresh file without pages."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/shmem_enabled") as f:
            line = f.read()
    except OSError:
        return True
    return "[never]" in line or "[deny]" in line


def test_fresh_daemon_memory_is_filled_through_its_fd_and_round_trips(client, monkeypatch):
    # 24 MiB of a size nothing cached: the daemon hands a memory file with
    # no pages, which the client fills (pwrite beside populate-and-copy);
    # the next upload after a delete reuses the block and the mapping, whose
    # first part it maps then. The fill is watched, not replaced.
    fills = []
    fill_fresh = _mapping_cache.Mapping.fill_fresh

    def watched(self, fd, offset, src):
        fills.append(len(src))
        fill_fresh(self, fd, offset, src)

    monkeypatch.setattr(_mapping_cache.Mapping, "fill_fresh", watched)
    x = sample((3 * 1024, 2048 + 1), seed=8)
    assert x.nbytes > 16 * MIB
    before = stats(client)
    r = placement.device_put(x, 1)
    assert stats(client).uploads == before.uploads + 1
    if small_shared_pages_only():
        assert fills == [x.nbytes]  # one slot, one piece (no progress listener)
    np.testing.assert_array_equal(r.to_numpy(), x)
    r.delete()
    before = stats(client)
    y = x * 2
    r = placement.device_put(y, 1)
    after = stats(client)
    assert after.cache.hits > before.cache.hits, after
    assert len(fills) <= 1  # the block came back with its pages
    np.testing.assert_array_equal(r.to_numpy(), y)
    r.delete()


def test_small_arrays_and_forced_paths_are_not_written_in_place(client):
    small = sample((512, 256))  # 512 KiB: under AUTO's 1 MiB
    big = sample((1024, 1024), seed=3)
    rule = _placing.device_rule(4)
    before = stats(client)
    r = placement.device_put(small, 4)
    infos = [client.tensors.upload(big, rule, path=p) for p in ("region", "stream")]
    after = stats(client)
    assert (after.uploads, after.fallbacks) == (before.uploads, before.fallbacks)
    np.testing.assert_array_equal(r.to_numpy(), small)
    for info in infos:
        np.testing.assert_array_equal(placement.lookup(info.id).to_numpy(), big)
    r.delete()
    client.delete_tensors([info.id for info in infos])


def test_a_shard_under_256_kib_falls_back_for_the_call_only(client):
    x = sample((1024, 256), seed=4)  # 1 MiB over 8 devices: 128 KiB shards
    sharding = NamedSharding(Mesh(np.arange(8), ("data",)), PartitionSpec("data"))
    before = stats(client)
    r = placement.device_put(x, sharding)
    after = stats(client)
    assert after.fallbacks == before.fallbacks + 1 and after.uploads == before.uploads
    assert after.off is None  # the next call tries again
    np.testing.assert_array_equal(r.to_numpy(), x)
    r.delete()
    with pytest.raises(errors.FailedPreconditionError):
        client.tensors.upload(x, _placing.sharding_rule(client, sharding), path="inplace")
    r = placement.device_put(sample((1024, 1024)), 5)
    assert stats(client).uploads == after.uploads + 1
    r.delete()


def test_inplace_needs_a_daemon_with_a_region_socket(daemon):
    with LocalDaemon(daemon.binary, args=["--region_socket="]) as off:
        c = placement.Client(off.address)
        try:
            x = sample((1024, 1024))
            with pytest.raises(errors.FailedPreconditionError, match="inplace"):
                c.tensors.upload(x, path=placement.TransferPath.INPLACE)
            r = placement.device_put(x, 0, client=c)  # AUTO: the stream
            np.testing.assert_array_equal(r.to_numpy(), x)
            assert stats(c).uploads == 0
            r.delete()
        finally:
            c.close()


def test_an_older_daemon_is_asked_once_and_inplace_says_it_cannot(client, monkeypatch):
    asked = []

    def older(header):
        asked.append(header)
        raise errors.UnimplementedError("Method not found: ReserveUpload")

    c = placement.Client(client.target)
    try:
        monkeypatch.setattr(c.tensors.inplace, "_reserve", older)
        x = sample((1024, 1024))
        for device in (0, 1):
            r = placement.device_put(x, device, client=c)
            np.testing.assert_array_equal(r.to_numpy(), x)
            r.delete()
        assert len(asked) == 1
        assert stats(c).off.startswith("UNIMPLEMENTED")
        with pytest.raises(errors.FailedPreconditionError, match="older placementd"):
            c.tensors.upload(x, path="inplace")
    finally:
        c.close()


# The daemon's words (server/view/upload_reservations.cc, cpu_backend.cc).
@pytest.mark.parametrize("message,lasting", [
    ("writing in place needs the region socket, which this daemon runs without "
     "(--region_socket ''); upload through the stream", True),
    ("the cuda platform cannot hand out device memory for writing in place", True),
    ("device 0: a buffer of 131072 bytes shares its memory with others (under 262144 bytes), "
     "so it cannot be written in place; upload it through a region", False),
    ("shard 1 is on device 4 of process 1; only shards of this daemon can be written in place",
     False),
], ids=["fd-passing-off", "platform", "small-shard", "remote-shard"])
def test_which_refusals_auto_remembers(client, monkeypatch, message, lasting):
    def refuse(header):
        raise errors.FailedPreconditionError(message)

    c = placement.Client(client.target)
    try:
        monkeypatch.setattr(c.tensors.inplace, "_reserve", refuse)
        r = placement.device_put(sample((1024, 1024)), 0, client=c)
        r.delete()
        assert (stats(c).off is not None) == lasting
    finally:
        c.close()


def test_an_error_while_writing_cancels_and_frees_the_memory(client):
    assert all(v == 0 for v in wait_for_memory(client).values())
    tensors = len(client.tensors.list())
    x = sample((1024, 1024))  # replicated on 4 devices: the callback stops it after a slot

    def stop(done, total):
        raise RuntimeError("stopped by the caller")

    before = stats(client)
    with pytest.raises(RuntimeError, match="stopped by the caller"):
        placement.device_put(x, NamedSharding(Mesh(np.arange(4), ("data",)), PartitionSpec()),
                             progress=stop)
    assert stats(client).uploads == before.uploads
    left = wait_for_memory(client)
    assert all(v == 0 for v in left.values()), left  # cancelled at once, not at its expiry
    assert len(client.tensors.list()) == tensors


def test_the_mapping_cache_keeps_to_its_bound(client):
    x = sample((1024, 1024))
    none_kept = placement.Client(client.target,
                                 TransportOptions(inplace_mapping_bytes=0, session="none"))
    try:
        r = placement.device_put(x, 6, client=none_kept)
        s = stats(none_kept)
        assert s.uploads == 1 and s.cache.misses >= 1
        assert s.cache.evictions == s.cache.misses and s.cache.mapped_bytes == 0
        r.delete()
    finally:
        none_kept.close()

    c = placement.Client(client.target)
    try:
        kept = []
        for device in range(4):  # blocks of four devices: four files, or more
            kept.append(placement.device_put(x, device, client=c))
            if device == 0:
                one_file = stats(c).cache.mapped_bytes
                assert one_file >= x.nbytes
        full = stats(c).cache
        assert full.evictions == 0 and full.mapped_bytes >= one_file
        for r in kept:
            r.delete()
    finally:
        c.close()
    assert stats(c).cache.mappings == 0  # close() unmaps everything

    bounded = placement.Client(client.target, TransportOptions(inplace_mapping_bytes=one_file))
    try:
        for device in range(4):
            placement.device_put(x, device, client=bounded).delete()
        s = stats(bounded).cache
        if s.misses > 1:  # the devices' blocks are in separate files
            assert s.evictions >= s.misses - 1
        assert s.mapped_bytes <= one_file
    finally:
        bounded.close()


def test_a_restarted_daemon_gets_the_upload_and_the_old_mappings_go(daemon, tmp_path):
    target = f"unix:{tmp_path}/p.sock"
    x = sample((1024, 1024))
    first = LocalDaemon(daemon.binary, listen=target)
    try:
        c = placement.Client(target)
        placement.device_put(x, 0, client=c).keep()
        assert stats(c).cache.mappings == 1
    finally:
        first.stop()
    with LocalDaemon(daemon.binary, listen=target):
        assert len(c.list_devices()) == 8  # reconnected (retried on UNAVAILABLE)
        # ReserveUpload meets the forgotten session: a new one, and the first
        # daemon's file (alive only through the mapping) is unmapped.
        r = placement.device_put(x + 1, 0, client=c)
        s = stats(c)
        assert s.uploads == 2 and s.cache.misses == 2 and s.cache.mappings == 1, s
        np.testing.assert_array_equal(r.to_numpy(), x + 1)
        r.delete()
        c.close()


def test_options_validate():
    with pytest.raises(errors.InvalidArgumentError, match="inplace_mapping_bytes"):
        TransportOptions(inplace_mapping_bytes=-1)
    assert TransportOptions(transfer_path="inplace").transfer_path is placement.TransferPath.INPLACE
    with pytest.raises(errors.InvalidArgumentError, match="'inplace'"):
        TransportOptions(transfer_path="inplaces")


# --- Without the daemon -------------------------------------------------------------

def memfd(size, fill=0):
    fd = os.memfd_create("test-inplace")
    os.ftruncate(fd, size)
    if fill:
        os.pwrite(fd, bytes([fill]) * size, 0)
    return fd


def test_the_cache_maps_a_file_once_whatever_fd_names_it_and_evicts_lru():
    cache = _mapping_cache.MappingCache(limit_bytes=3 * MIB // 2)
    a_fd, b_fd = memfd(MIB, 1), memfd(MIB, 2)
    try:
        a = cache.acquire(a_fd, MIB)
        assert a.bytes[0] == 1
        a.bytes[:4] = 7
        cache.release(a)
        other = os.open(f"/proc/self/fd/{a_fd}", os.O_RDWR)  # a new fd of the same file
        try:
            again = cache.acquire(other, MIB)
        finally:
            os.close(other)
        assert again is a and list(again.bytes[:5]) == [7, 7, 7, 7, 1]
        assert os.pread(a_fd, 4, 0) == b"\x07" * 4  # MAP_SHARED: the file has the bytes
        s = cache.stats()
        assert (s.hits, s.misses, s.mappings) == (1, 1, 1)
        b = cache.acquire(b_fd, MIB)  # 2 MiB > 1.5: a is not pinned
        s = cache.stats()
        assert (s.evictions, s.mappings, s.mapped_bytes) == (0, 2, 2 * MIB)  # a still pinned
        cache.release(again)  # now a goes: it was used less recently than b
        s = cache.stats()
        assert (s.evictions, s.mappings, s.mapped_bytes) == (1, 1, MIB)
        assert len(a.bytes) == 0  # unmapped
        cache.release(b)
        assert cache.stats().mappings == 1
        with pytest.raises(errors.InternalError, match="memory file"):
            cache.acquire(b_fd, 2 * MIB)
        cache.close()
        assert cache.stats().mappings == 0
        with pytest.raises(errors.FailedPreconditionError):
            cache.acquire(b_fd, MIB)
    finally:
        os.close(a_fd)
        os.close(b_fd)


@pytest.mark.parametrize("size,offset", [(5 * MIB + 123, 0), (40 * MIB, 0),
                                         (24 * MIB + 4000, 3 * 4096)],
                         ids=["pwrite-only", "split", "split-off-a-huge-page"])
def test_a_file_with_no_pages_is_filled_byte_exact(size, offset):
    fd = memfd(offset + size + 8192)
    cache = _mapping_cache.MappingCache()
    try:
        assert _mapping_cache.has_no_pages(fd)
        m = cache.acquire(fd, offset + size + 8192)
        assert _mapping_cache.has_no_pages(fd)  # mapping it allocated nothing
        data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
        m.fill_fresh(fd, offset, data)
        assert not _mapping_cache.has_no_pages(fd)
        assert os.pread(fd, size, offset) == data.tobytes()
        assert np.array_equal(m.bytes[offset:offset + size], data)
        assert os.pread(fd, 1, offset + size) == b"\0"
        if offset:
            assert os.pread(fd, 1, offset - 1) == b"\0"
        m.populate(offset, offset + size)  # maps the part pwrite wrote; changes nothing
        assert np.array_equal(m.bytes[offset:offset + size], data)
        cache.release(m)
    finally:
        cache.close()
        os.close(fd)


def test_populate_skips_what_it_mapped_before():
    assert _mapping_cache._gaps([(0, 10), (20, 30)], 5, 25) == [(10, 20)]
    assert _mapping_cache._gaps([], 0, 8) == [(0, 8)]
    assert _mapping_cache._gaps([(0, 8)], 2, 6) == []
    assert _mapping_cache._merged([(0, 10), (20, 30)], 10, 20) == [(0, 30)]
    assert _mapping_cache._merged([(20, 30)], 0, 5) == [(0, 5), (20, 30)]


def test_slots_are_written_row_major_at_their_offsets():
    """A reservation of a (6, 8) int32 array on a 2x2 mesh, one file per
    device, the boxes at made-up offsets: each slot's bytes are its box."""
    x = np.arange(48, dtype=np.int32).reshape(6, 8)
    response = vpb.ReserveUploadResponse(reservation_id="u-test")
    response.tensor.dtype = types_pb2.DTYPE_I32
    response.tensor.shape.extend(x.shape)
    boxes = [((0, 3), (0, 4)), ((0, 3), (4, 8)), ((3, 6), (0, 4)), ((3, 6), (4, 8))]
    fds = [memfd(8192) for _ in boxes]
    try:
        for i, box in enumerate(boxes):
            shard = response.tensor.shards.add(device_id=i, shape=[3, 4], size_bytes=48)
            for begin, end in box:
                shard.ranges.add(begin=begin, end=end)
            response.slots.add(shard_index=i, device_id=i, size_bytes=48, fd_index=i,
                               offset=4096 + 16 * i, mapping_bytes=8192)
        cache = _mapping_cache.MappingCache()
        mappings = [cache.acquire(fd, 8192) for fd in fds]
        reports = []
        _inplace._write_slots(x, response, fds, mappings, reports.append)
        for m in mappings:
            cache.release(m)
        cache.close()
        assert sum(reports) == x.nbytes and len(reports) == 4
        for i, ((r0, r1), (c0, c1)) in enumerate(boxes):
            assert os.pread(fds[i], 48, 4096 + 16 * i) == x[r0:r1, c0:c1].tobytes()
            assert os.pread(fds[i], 16, 4096 + 16 * i - 16) == bytes(16)  # nothing before
    finally:
        for fd in fds:
            os.close(fd)
