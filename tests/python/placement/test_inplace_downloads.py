"""Downloads read in place (placement._inplace_read, docs/python.md
"Downloads read in place"): against the suite's same-host CPU daemon,
to_numpy() of 1 MiB or more exports the shards for a copy (ExportShards
for_copy), copies each distinct box once out of the daemon's memory and
unexports at once -- one device, a 2x2 mesh sharded both ways, replicated,
a padded sharding with an empty shard, into a new array or out=; a tensor
uploaded in place is read through the upload's kept mapping (no new
mapping), and a block read so stays reusable (the next upload after a
delete writes through the same mapping); sealed shards (under 256 KiB, or
sealed by a view) are mapped read-only for the download only; small
tensors, selections and forced STREAM / REGION take the old paths; the
export is gone after the download also when it fails (a wrong-shaped out=,
a progress callback raising); INPLACE raises FailedPreconditionError where
it cannot and AUTO falls back, remembering only what lasts. The box
selection and coverage checks are also tested on made-up messages."""
import numpy as np
import pytest

import placement
from placement import Mesh, NamedSharding, PartitionSpec, TransportOptions, errors, views
from placement import _inplace_read
from placement.testing import LocalDaemon
from placement.v1 import types_pb2
from placement.v1 import view_service_pb2 as vpb

from conftest import wait_for_memory

MIB = 1 << 20


def stats(client):
    return client.tensors.inplace.stats()


def exports(client):
    return views.list_exports(client)[0]


def sample(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 50).astype(dtype)


def mesh_2x2():
    return Mesh(np.arange(4).reshape(2, 2), ("data", "model"))


def read(client, r, **kwargs):
    """r.to_numpy(**kwargs), and how many downloads were read in place."""
    before = stats(client).downloads
    y = r.to_numpy(**kwargs)
    return y, stats(client).downloads - before


# --- Taken, and round trips ---------------------------------------------------------

def test_a_single_device_download_is_read_in_place_through_the_uploads_mapping(client):
    x = sample((1024, 1024))  # 4 MiB
    r = placement.device_put(x, 2)
    before = stats(client)
    assert before.uploads >= 1 and before.cache.mappings >= 1
    y, taken = read(client, r)
    after = stats(client)
    assert taken == 1, after
    assert after.download_fallbacks == before.download_fallbacks and after.download_off is None
    # The upload's file, mapped read-write and kept: no new mapping at all.
    assert after.cache.hits == before.cache.hits + 1, after
    assert after.cache.misses == before.cache.misses, after
    assert after.read_only_mappings == before.read_only_mappings
    assert y.flags.writeable and y.flags.c_contiguous and y.dtype == x.dtype
    np.testing.assert_array_equal(y, x)
    assert exports(client) == []  # unexported at once
    r.delete()


@pytest.mark.parametrize("spec", [PartitionSpec("data", "model"), PartitionSpec("model"),
                                  PartitionSpec()], ids=["both-axes", "model", "replicated"])
def test_mesh_layouts_round_trip_each_box_once(client, spec):
    x = sample((1024, 2048), seed=1)  # 8 MiB; 2 MiB shards when split both ways
    r = placement.device_put(x, NamedSharding(mesh_2x2(), spec))
    boxes = len({tuple((s.start, s.stop) for s in shard.index) for shard in r.addressable_shards})
    before = stats(client)
    y, taken = read(client, r)
    after = stats(client)
    assert taken == 1
    np.testing.assert_array_equal(y, x)
    # One shard per distinct box was exported, each through the upload's mapping.
    assert after.cache.hits - before.cache.hits == boxes, (boxes, after)
    assert after.cache.misses == before.cache.misses
    out = np.full_like(x, -1)
    z, taken = read(client, r, out=out)
    assert taken == 1 and z is out
    np.testing.assert_array_equal(out, x)
    assert exports(client) == []
    r.delete()


def test_large_column_boxes_are_copied_on_threads_and_round_trip(client):
    x = sample((2048, 4096), seed=13)  # 32 MiB: two 16 MiB column boxes, strided in the result
    r = placement.device_put(x, NamedSharding(mesh_2x2(), PartitionSpec(None, "model")))
    y, taken = read(client, r)
    assert taken == 1
    np.testing.assert_array_equal(y, x)
    r.delete()


def test_a_padded_sharding_with_an_empty_shard_round_trips(client):
    x = sample((6, 65536), seed=5)  # 4 ways padded: 2 + 2 + 2 + 0 rows, 512 KiB shards
    r = placement.device_put(x, NamedSharding(Mesh(np.arange(4), ("data",)),
                                              PartitionSpec("data"), padded=True))
    assert [s.shape[0] for s in r.addressable_shards] == [2, 2, 2, 0]
    y, taken = read(client, r)
    assert taken == 1
    np.testing.assert_array_equal(y, x)
    assert exports(client) == []
    r.delete()


def test_progress_is_told_box_by_box(client):
    x = sample((1024, 2048), seed=6)  # 4 boxes of 2 MiB
    r = placement.device_put(x, NamedSharding(mesh_2x2(), PartitionSpec("data", "model")))
    seen = []
    y, taken = read(client, r, progress=lambda done, total: seen.append((done, total)))
    assert taken == 1
    np.testing.assert_array_equal(y, x)
    assert [d for d, _ in seen] == [2 * MIB, 4 * MIB, 6 * MIB, 8 * MIB], seen
    assert all(total == x.nbytes for _, total in seen)
    r.delete()


def test_progress_moves_within_one_box(client, monkeypatch):
    from placement import _progress
    monkeypatch.setattr(_progress, "PIECE_BYTES", MIB)  # 64 MiB in use
    x = sample((1024, 1024), seed=10)  # 4 MiB on one device: one box
    r = placement.device_put(x, 2)
    seen = []
    y, taken = read(client, r, progress=lambda done, total: seen.append((done, total)))
    assert taken == 1
    np.testing.assert_array_equal(y, x)
    assert [d for d, _ in seen] == [MIB, 2 * MIB, 3 * MIB, 4 * MIB], seen
    r.delete()


def test_a_block_read_in_place_stays_reusable(client):
    """The download of a staged upload maps the tensor's file read-write
    (a miss), unsealed: after a delete the daemon hands the same block to
    the next upload, which writes through that mapping (a hit)."""
    x = sample((1024, 1024), seed=7)
    info = client.tensors.upload(x, placement._placing.device_rule(5), path="region")
    r = placement.lookup(info.id)
    before = stats(client)
    y, taken = read(client, r)
    mid = stats(client)
    assert taken == 1
    assert mid.cache.misses == before.cache.misses + 1 and mid.read_only_mappings == \
        before.read_only_mappings, mid
    np.testing.assert_array_equal(y, x)
    client.delete_tensors([info.id])
    r2 = placement.device_put(x + 1, 5)
    after = stats(client)
    assert after.uploads == mid.uploads + 1
    assert after.cache.hits == mid.cache.hits + 1 and after.cache.misses == mid.cache.misses, after
    np.testing.assert_array_equal(read(client, r2)[0], x + 1)
    r2.delete()


def test_sealed_shards_are_mapped_read_only_and_not_kept(client):
    """A tensor whose block a view sealed, and shards under 256 KiB (private
    copies), come sealed: read through a read-only mapping made for the
    download, not through (or into) the cache."""
    x = sample((1024, 1024), seed=8)
    r = placement.device_put(x, 6)
    held = np.asarray(r)  # a view: the daemon sealed the block
    before = stats(client)
    y, taken = read(client, r)
    after = stats(client)
    assert taken == 1
    assert after.read_only_mappings == before.read_only_mappings + 1, after
    assert (after.cache.hits, after.cache.misses) == (before.cache.hits, before.cache.misses)
    np.testing.assert_array_equal(y, x)
    del held
    r.delete()

    small = sample((1024, 256), seed=9)  # 1 MiB over 8 devices: 128 KiB shards
    r = placement.device_put(small, NamedSharding(Mesh(np.arange(8), ("data",)),
                                                  PartitionSpec("data")))
    before = stats(client)
    y, taken = read(client, r)
    after = stats(client)
    assert taken == 1
    assert after.read_only_mappings == before.read_only_mappings + 8, after
    assert after.cache.mappings == before.cache.mappings
    np.testing.assert_array_equal(y, small)
    assert exports(client) == []
    r.delete()


# --- Not taken ----------------------------------------------------------------------

def test_small_tensors_selections_and_forced_paths_are_not_read_in_place(client):
    small = sample((512, 256))  # 512 KiB: under AUTO's 1 MiB
    big = sample((1024, 1024), seed=3)
    r_small = placement.device_put(small, 4)
    r_big = placement.device_put(big, 4)
    before = stats(client)
    np.testing.assert_array_equal(r_small.to_numpy(), small)
    for p in ("region", "stream"):
        np.testing.assert_array_equal(client.tensors.download(r_big.id, path=p)[1], big)
    np.testing.assert_array_equal(
        client.tensors.download(r_big.id, device_id=4, info=r_big._info)[1], big)
    forced = placement.Client(client.target, TransportOptions(transfer_path="region"))
    try:
        np.testing.assert_array_equal(placement.lookup(r_big.id, client=forced).to_numpy(), big)
        assert stats(forced).downloads == 0
    finally:
        forced.close()
    after = stats(client)
    assert (after.downloads, after.download_fallbacks) == (before.downloads,
                                                           before.download_fallbacks)
    # INPLACE reads a small tensor in place too.
    y = client.tensors.download(r_small.id, path="inplace")[1]
    np.testing.assert_array_equal(y, small)
    assert stats(client).downloads == after.downloads + 1
    r_small.delete()
    r_big.delete()


def test_an_out_inside_a_shared_region_is_written_by_the_daemon(client):
    x = sample((1024, 1024), seed=10)
    r = placement.device_put(x, 1)
    with placement.SharedRegion(x.nbytes, client=client) as region:
        out = region.ndarray(x.dtype, x.shape)
        y, taken = read(client, r, out=out)
        assert taken == 0 and y is out
        np.testing.assert_array_equal(out, x)
        del out, y
    r.delete()


def test_a_partial_tensor_takes_the_old_path_and_inplace_refuses_it(client):
    mesh = Mesh(np.arange(2), ("data",))
    pieces = [placement.device_put(np.full((512, 512), i + 1, np.float32), i) for i in range(2)]
    partial = placement.make_array_from_single_device_arrays(
        (512, 512), NamedSharding(mesh, PartitionSpec(), partial_axes=("data",)), pieces,
        donate=True)
    try:
        before = stats(client)
        # The daemon's own answer, as before: its shards are contributions to reduce.
        with pytest.raises(errors.FailedPreconditionError, match="all-reduce it first"):
            partial.to_numpy()
        after = stats(client)
        assert (after.downloads, after.download_fallbacks) == (before.downloads,
                                                               before.download_fallbacks)
        with pytest.raises(errors.FailedPreconditionError, match="partial"):
            client.tensors.download(partial.id, path="inplace")
        assert stats(client).downloads == before.downloads
        assert exports(client) == []
    finally:
        partial.delete()


# --- Failures -----------------------------------------------------------------------

def test_the_export_ends_when_the_copy_fails(client):
    x = sample((1024, 2048), seed=11)
    r = placement.device_put(x, NamedSharding(mesh_2x2(), PartitionSpec("data", "model")))
    # Without `info` the shape is only known from the export: checked there.
    with pytest.raises(errors.InvalidArgumentError, match="out is"):
        client.tensors.download(r.id, out=np.empty((2048, 1024), np.float32))
    assert exports(client) == []

    def stop(done, total):
        raise RuntimeError("stopped by the caller")

    before = stats(client)
    with pytest.raises(RuntimeError, match="stopped by the caller"):
        r.to_numpy(progress=stop)
    assert stats(client).downloads == before.downloads
    assert exports(client) == []
    # With info (RemoteArray's), a wrong out is refused before anything is exported.
    with pytest.raises(errors.InvalidArgumentError):
        r.to_numpy(out=np.empty((1024, 2048), np.float64))
    assert exports(client) == []
    np.testing.assert_array_equal(read(client, r)[0], x)
    r.delete()
    left = wait_for_memory(client)
    assert all(v == 0 for v in left.values()), left


def test_inplace_needs_a_daemon_with_a_region_socket(daemon):
    with LocalDaemon(daemon.binary, args=["--region_socket="]) as off:
        c = placement.Client(off.address)
        try:
            x = sample((1024, 1024))
            r = placement.device_put(x, 0, client=c)
            with pytest.raises(errors.FailedPreconditionError, match="inplace"):
                c.tensors.download(r.id, path="inplace")
            np.testing.assert_array_equal(r.to_numpy(), x)  # AUTO: the stream
            assert stats(c).downloads == 0
            r.delete()
        finally:
            c.close()


def test_an_older_daemon_is_asked_once_and_inplace_says_it_cannot(client, monkeypatch):
    c = placement.Client(client.target)
    asked = []
    real = c.unary

    def older(method, request, **kwargs):
        if isinstance(request, vpb.ExportShardsRequest):
            asked.append(request)
            raise errors.UnimplementedError("Method not found: ExportShards")
        return real(method, request, **kwargs)

    try:
        monkeypatch.setattr(c, "unary", older)
        x = sample((1024, 1024))
        r = placement.device_put(x, 0, client=c)
        for _ in range(2):
            np.testing.assert_array_equal(r.to_numpy(), x)
        assert len(asked) == 1
        s = stats(c)
        assert s.downloads == 0 and s.download_fallbacks == 1
        assert s.download_off.startswith("UNIMPLEMENTED")
        with pytest.raises(errors.FailedPreconditionError, match="cannot export"):
            c.tensors.download(r.id, path="inplace")
        r.delete()
    finally:
        c.close()


# The daemon's words (server/view/export_registry.cc).
@pytest.mark.parametrize("message,lasting", [
    ("views hand their memory over on the region socket, and this daemon runs with "
     "--region_socket '' (fd passing off)", True),
    ("shard 1 of tensor 't' is on device 9 of process 1; export it through that node's daemon",
     False),
    ("session 's' ended while the shards were exported; unexported", False),
], ids=["fd-passing-off", "remote-shard", "session-ended"])
def test_which_refusals_auto_remembers(client, monkeypatch, message, lasting):
    c = placement.Client(client.target)
    real = c.unary

    def refuse(method, request, **kwargs):
        if isinstance(request, vpb.ExportShardsRequest):
            raise errors.FailedPreconditionError(message)
        return real(method, request, **kwargs)

    try:
        monkeypatch.setattr(c, "unary", refuse)
        x = sample((1024, 1024))
        r = placement.device_put(x, 0, client=c)
        np.testing.assert_array_equal(r.to_numpy(), x)
        s = stats(c)
        assert s.download_fallbacks == 1 and (s.download_off is not None) == lasting
        r.delete()
    finally:
        c.close()


# --- Without the daemon -------------------------------------------------------------

def shard(info, box, replica=0, itemsize=4):
    s = info.shards.add(replica_id=replica)
    for begin, end in box:
        s.ranges.add(begin=begin, end=end)
    s.size_bytes = int(np.prod([e - b for b, e in box])) * itemsize
    return s


def test_one_shard_per_box_is_exported_replica_0_first():
    info = types_pb2.TensorInfo(id="t", dtype=types_pb2.DTYPE_F32, shape=[4, 4])
    shard(info, [(0, 2), (0, 4)], replica=1)
    shard(info, [(0, 2), (0, 4)], replica=0)
    shard(info, [(2, 4), (0, 4)], replica=0)
    shard(info, [(2, 4), (0, 4)], replica=1)
    shard(info, [(4, 4), (0, 4)])  # an empty padded shard
    assert _inplace_read._one_per_box(info) == [1, 2]


def test_boxes_must_cover_the_tensor():
    response = vpb.ExportShardsResponse()
    response.tensor.id = "t"
    response.tensor.dtype = types_pb2.DTYPE_F32
    response.tensor.shape.extend([4, 4])
    shard(response.tensor, [(0, 2), (0, 4)])
    shard(response.tensor, [(2, 4), (0, 4)])
    response.shards.add(shard_index=0, size_bytes=32, fd_index=0)
    with pytest.raises(_inplace_read._Cannot, match="8 of its 16"):
        _inplace_read._boxes(response)
    response.shards.add(shard_index=0, size_bytes=32, fd_index=1)  # a replica: skipped
    response.shards.add(shard_index=1, size_bytes=32, fd_index=2)
    boxes = _inplace_read._boxes(response)
    assert [(i, slices, shape) for i, (slices, shape) in boxes] == [
        (0, (slice(0, 2), slice(0, 4)), (2, 4)), (2, (slice(2, 4), slice(0, 4)), (2, 4))]
    response.shards[2].size_bytes = 16
    with pytest.raises(errors.InternalError, match="16 bytes for a box"):
        _inplace_read._boxes(response)


@pytest.mark.parametrize("box", [(slice(0, 2048), slice(0, 4096)), (slice(0, 1024), slice(None)),
                                 (slice(None), slice(1024, 3072)), (slice(5, 6), slice(0, 7))],
                         ids=["whole", "rows", "columns", "small"])
def test_copy_box_copies_contiguous_and_strided_boxes_on_threads(box):
    target = np.zeros((2048, 4096), np.float32)  # 32 MiB: boxes of 8 MiB and more use threads
    src = sample(target[box].shape, seed=12)
    _inplace_read.copy_box(target[box], src)
    np.testing.assert_array_equal(target[box], src)
    target[box] = 0
    assert not target.any()  # nothing outside the box was written
