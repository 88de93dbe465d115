"""Same-host shared-memory regions in the Python client (docs/api/regions.md,
docs/python.md "Same-host regions"): same-host detection, forced and
automatic paths (observed through the daemon's region byte counters),
round trips of every dtype through regions byte-identical to the stream,
pytrees mixing region slices and chunks, the caller's own SharedRegions
(no copy on this side), refusals with clear errors, the prefetch region
ring, the staging pool's bounds, and every region unregistered when its
client closes."""
import dataclasses
import gc
import os
import re
import threading
import urllib.request

import ml_dtypes
import numpy as np
import pytest

import placement
from placement import (DevicePlacement, NamedSharding, PartitionSpec, SharedRegion, TransferPath,
                       TransportOptions, _region_fd, _region_pool, errors, regions)
from placement.testing import LocalDaemon

from conftest import DEVICE_MEMORY, check_alive

DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.int16, np.int32,
          np.int64, np.uint8, np.bool_]
KIB = 1 << 10
MIB = 1 << 20


@pytest.fixture(scope="session")
def daemon():
    """The suite's daemon, with metrics (the region byte counters say which
    path bytes took)."""
    with LocalDaemon(args=[f"--cpu_device_memory={DEVICE_MEMORY}",
                           "--metrics_listen=127.0.0.1:0"]) as d:
        yield d
        check_alive(d)


def region_bytes(daemon):
    """placementd_region_bytes_total by direction: {"in": n, "out": n}."""
    with urllib.request.urlopen(daemon.metrics_url, timeout=10) as r:
        text = r.read().decode()
    found = dict(re.findall(r'^placementd_region_bytes_total\{direction="(in|out)"\} (\S+)$',
                            text, re.M))
    return {k: int(float(found.get(k, 0))) for k in ("in", "out")}


class Moved:
    """Region bytes the daemon moved inside a `with` block."""

    def __init__(self, daemon):
        self._daemon = daemon

    def __enter__(self):
        self._before = region_bytes(self._daemon)
        return self

    def __exit__(self, *exc):
        after = region_bytes(self._daemon)
        self.into = after["in"] - self._before["in"]  # uploads read from regions
        self.out = after["out"] - self._before["out"]  # downloads written into regions


@pytest.fixture
def by_path(client):
    """One client per forced path (and the default "auto" one), closed after."""
    made = {"auto": client}
    for path in ("stream", "region"):
        made[path] = placement.Client(client.target, TransportOptions(transfer_path=path))
    yield made
    for path in ("stream", "region"):
        made[path].close()


def sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    return (rng.standard_normal(shape) * 100).astype(dtype)


# --- Same-host detection ------------------------------------------------------------
def test_host_identity_is_the_daemons_rule(client):
    with open("/etc/machine-id") as f:
        assert _region_fd.host_id() == f.read().strip()
    with open("/proc/sys/kernel/random/boot_id") as f:
        assert _region_fd.boot_id() == f.read().strip()
    status = client.status()
    assert (status.host_id, status.boot_id) == (_region_fd.host_id(), _region_fd.boot_id())
    # A filesystem socket by default (its mode decides who may connect).
    assert status.region_socket.startswith("/")
    assert "/placementd-regions-" in status.region_socket
    assert _region_fd.socket_address("@abc") == "\0abc"
    assert _region_fd.socket_address("/run/p.sock.regions") == "/run/p.sock.regions"


@pytest.mark.parametrize("target,local", [
    ("127.0.0.1:50051", True), ("localhost:1", True), ("localhost", True), ("[::1]:5", True),
    ("unix:/run/placementd.sock", True), ("unix-abstract:placementd", True),
    ("dns:///127.0.0.1:5", True), ("ipv4:127.0.0.2:5", True), ("ipv6:[::1]:5", True),
    ("10.0.0.7:50051", False), ("node-3:50051", False), ("dns:///node-3:1", False),
    ("localhost.example.com:1", False)])
def test_local_targets(target, local):
    assert _region_fd.local_target(target) is local


def test_same_host_needs_every_id_and_a_region_socket(client, monkeypatch):
    assert regions.same_host(client)
    real = client.status()

    def status_with(**changes):
        fake = dataclasses.replace(real, **changes)
        return lambda: fake

    for changes in ({"host_id": "another-machine"}, {"boot_id": "another-boot"},
                    {"region_socket": ""}, {"host_id": ""}):
        monkeypatch.setattr(client, "status", status_with(**changes))
        assert not regions.same_host(client), changes
    monkeypatch.undo()
    remote = placement.Client(client.target, TransportOptions(connect_timeout=0))
    remote.target = "10.1.2.3:50051"  # same daemon, seen through a non-loopback address
    assert not regions.same_host(remote)
    remote.target = client.target
    remote.close()


# --- Choosing the path ----------------------------------------------------------------
def test_transfer_path_option():
    assert TransportOptions().transfer_path is TransferPath.AUTO
    assert TransportOptions(transfer_path="region").transfer_path is TransferPath.REGION
    assert TransportOptions(transfer_path=TransferPath.STREAM).transfer_path == "stream"
    with pytest.raises(errors.InvalidArgumentError) as e:
        TransportOptions(transfer_path="shm")
    assert str(e.value) == ("transfer_path is 'shm'; expected 'auto', 'stream', 'region' or "
                            "'inplace'")


@pytest.mark.parametrize("path,nbytes,through_region", [
    ("stream", 4 * MIB, False), ("region", 4 * KIB, True), ("region", 4 * MIB, True),
    ("auto", 256 * KIB - 1, False), ("auto", 256 * KIB, True), ("auto", MIB - 1, True),
    ("auto", 4 * MIB, True)])
def test_each_path_is_taken(daemon, by_path, path, nbytes, through_region):
    c = by_path[path]
    x = np.arange(nbytes, dtype=np.uint8)
    before = c.tensors.inplace.stats()
    with Moved(daemon) as up:
        r = placement.device_put(x, 2, client=c)
    with Moved(daemon) as down:
        back = r.to_numpy()  # a download (np.asarray would view it in place: test_views.py)
    np.testing.assert_array_equal(back, x)
    # "auto" writes uploads of 1 MiB or more in place and reads such downloads
    # in place (test_inplace.py, test_inplace_downloads.py): no region.
    in_place = path == "auto" and nbytes >= MIB
    after = c.tensors.inplace.stats()
    assert after.uploads == before.uploads + in_place
    assert after.downloads == before.downloads + in_place
    assert up.into == (nbytes if through_region and not in_place else 0)
    assert down.out == (nbytes if through_region and not in_place else 0)
    r.delete()


def test_forced_region_without_a_same_host_daemon_is_a_clear_error(daemon):
    with LocalDaemon(daemon.binary, args=["--region_socket="]) as off:
        forced = placement.Client(off.address, TransportOptions(transfer_path="region"))
        assert not regions.same_host(forced)
        with pytest.raises(errors.FailedPreconditionError) as e:
            placement.device_put(np.ones(4096, np.float32), 0, client=forced)
        assert str(e.value) == (f"transfer_path='region': the daemon at {off.address} is not on "
                                f"this host (or has no region socket); use 'auto' or 'stream'")
        assert isinstance(e.value, ValueError)
        with pytest.raises(errors.FailedPreconditionError):
            next(iter(DevicePlacement(client=forced).prefetch_to_device(
                iter([np.ones(4096, np.float32)]))))
        with pytest.raises(errors.FailedPreconditionError) as e:
            SharedRegion(MIB, client=forced)
        assert "does not share this host" in str(e.value)
        # "auto" takes the stream there, silently.
        auto = placement.Client(off.address)
        x = np.arange(MIB, dtype=np.float32)
        r = placement.device_put(x, 0, client=auto)
        np.testing.assert_array_equal(np.asarray(r), x)
        r.delete()
        assert auto.status().num_regions == 0
        auto.close()
        forced.close()


# --- Round trips ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_round_trips_through_regions_like_the_stream(daemon, client, by_path, dtype):
    mesh = placement.DeviceMeshManager().create_data_parallel_mesh()
    x = sample(dtype, (64, 1031))  # rows split over 8 devices; 1031 columns: odd byte counts
    for name, sharding in (("sharded", NamedSharding(mesh, PartitionSpec("data"))),
                           ("replicated", NamedSharding(mesh, PartitionSpec()))):
        with Moved(daemon) as moved:
            via_region = placement.device_put(x, sharding, client=by_path["region"])
        assert moved.into == x.nbytes, name
        via_stream = placement.device_put(x, sharding, client=by_path["stream"])
        tensors = by_path["region"].tensors
        for r in (via_region, via_stream):
            region_whole = tensors.download(r.id, path="region")[1]
            stream_whole = tensors.download(r.id, path="stream")[1]
            assert region_whole.dtype == np.dtype(dtype) and region_whole.shape == x.shape
            assert region_whole.tobytes() == stream_whole.tobytes() == x.tobytes(), name
            for shard in r.addressable_shards:
                region_shard = tensors.download(r.id, device_id=shard.device_id, info=r._info,
                                                path="region")[1]
                stream_shard = tensors.download(r.id, device_id=shard.device_id,
                                                path="stream")[1]
                assert region_shard.tobytes() == stream_shard.tobytes() == \
                    x[shard.index].tobytes(), (name, shard.device_id)
        via_region.delete()
        via_stream.delete()


def test_pytrees_mix_region_slices_and_chunks(daemon, by_path):
    tree = {"big": sample(np.float32, (256, 1024)), "small": np.arange(10, dtype=np.int16),
            "empty": np.zeros((0, 3), np.float64), "scalar": np.float32(2.5),
            "bf16": sample(ml_dtypes.bfloat16, (300, 700), seed=3)}
    total = sum(np.asarray(v).nbytes for v in tree.values())
    # "auto" decides on the batch's total (as the C++ client does): its small
    # leaves ride in the same staging region.
    for path, expect in (("auto", total), ("region", total), ("stream", 0)):
        with Moved(daemon) as moved:
            out = DevicePlacement(client=by_path[path]).place_on_device(tree)
        try:
            assert moved.into == expect, path
            for k, v in tree.items():
                back = np.asarray(out[k])
                assert back.dtype == np.asarray(v).dtype and back.shape == np.shape(v)
                assert back.tobytes() == np.asarray(v).tobytes(), (path, k)
        finally:
            placement.delete(out)


def test_download_into_a_callers_array(by_path):
    x = sample(np.float32, (512, 512))
    for path in ("region", "stream"):
        c = by_path[path]
        r = placement.device_put(x, 1, client=c)
        out = np.empty_like(x)
        assert r.to_numpy(out=out) is out
        np.testing.assert_array_equal(out, x)
        with pytest.raises(errors.InvalidArgumentError) as e:
            r.to_numpy(out=np.empty((512, 511), np.float32))
        assert "out is float32[512, 511]" in str(e.value)
        with pytest.raises(errors.InvalidArgumentError):
            r.to_numpy(out=np.empty((512, 512), np.float32).T)  # not C-contiguous
        r.delete()


# --- The caller's own regions -----------------------------------------------------------
def test_shared_region_in_place_no_staging(daemon, client):
    with SharedRegion(8 * MIB, "mine") as region:
        assert region.info.name == "mine" and region.size == 8 * MIB
        assert region.id in {r.id for r in regions.list_regions()}
        x = region.ndarray(np.float32, (1024, 1024))
        x[...] = sample(np.float32, (1024, 1024))
        staging_before = len(client.regions.free_regions())
        with Moved(daemon) as up:
            r = placement.device_put(x[256:], 0)  # a slice of a region view: still a slice
        assert up.into == x[256:].nbytes
        y = region.ndarray(np.float32, (768, 1024), offset=4 * MIB)
        with Moved(daemon) as down:
            assert r.to_numpy(out=y) is y
        assert down.out == y.nbytes
        np.testing.assert_array_equal(y, x[256:])
        assert len(client.regions.free_regions()) == staging_before  # nothing staged
        r2 = regions.upload_from_region(region, 0, np.float32, (16, 16), 3)
        np.testing.assert_array_equal(np.asarray(r2), x.reshape(-1)[:256].reshape(16, 16))
        view = regions.download_to_region(r2, region, offset=4 * MIB)
        np.testing.assert_array_equal(view, x.reshape(-1)[:256].reshape(16, 16))
        with pytest.raises(errors.OutOfRangeError):
            region.ndarray(np.float32, (3 * MIB,), offset=0)
        del x, y, view
        r.delete()
        r2.delete()
    assert region.closed
    assert region.id not in {r.id for r in regions.list_regions()}


def test_a_collected_region_is_unregistered(client):
    region = SharedRegion(MIB)
    rid = region.id
    del region
    gc.collect()
    client.flush()
    assert rid not in {r.id for r in regions.list_regions()}


# --- Refusals ---------------------------------------------------------------------------
def test_unsealed_memfd_is_refused(client):
    fd = os.memfd_create("unsealed", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, MIB)
        with pytest.raises(errors.InvalidArgumentError) as e:
            regions.register_fd(client, fd, MIB, "unsealed")
        assert "must be sealed with F_SEAL_SHRINK" in str(e.value)
    finally:
        os.close(fd)


def test_refused_register_calls(client):
    fd = _region_fd.create_sealed_memfd("r", MIB)
    try:
        socket_address = client.status().region_socket
        token = _region_fd.pass_fd(socket_address, fd)
        assert re.fullmatch(r"[0-9a-f]{32}", token)
        from placement.v1 import region_service_pb2 as rpb
        register = lambda **kw: client.unary(  # noqa: E731
            client.region_stub.RegisterRegion, rpb.RegisterRegionRequest(**kw), idempotent=False)
        with pytest.raises(errors.OutOfRangeError) as e:
            register(fd_token=token, size_bytes=2 * MIB)
        assert "larger than the region's memory" in str(e.value)
        with pytest.raises(errors.NotFoundError):  # single-use
            register(fd_token=token, size_bytes=MIB)
        with pytest.raises(errors.NotFoundError):
            register(fd_token="0" * 32)
    finally:
        os.close(fd)
    with pytest.raises(errors.UnavailableError) as e:
        _region_fd.pass_fd("@placementd-regions-nobody-listens", 0)
    assert "cannot reach the daemon's region socket @placementd-regions-nobody-listens" \
        in str(e.value)
    with pytest.raises(errors.NotFoundError):
        regions.unregister(client, "r-" + "0" * 32)
    with pytest.raises(errors.InvalidArgumentError):
        SharedRegion(0)


def test_a_region_unregistered_under_a_transfer_fails_it_cleanly(client):
    region = SharedRegion(MIB)
    x = region.ndarray(np.float32, (1024,))
    x[:] = 1
    region.unregister()  # the mapping stays here; the daemon dropped it
    with pytest.raises(errors.NotFoundError) as e:
        client.tensors.upload_from_region(region, 0, np.dtype(np.float32), (1024,))
    assert "no such region" in str(e.value)
    del x
    region.close()


# --- Prefetch over the region ring ---------------------------------------------------------
def test_prefetch_region_ring(daemon, client, monkeypatch):
    n = 12
    lent = []
    borrow = client.regions.borrow

    def recording_borrow(nbytes):
        lease = borrow(nbytes)
        if threading.current_thread().name == "placement-prefetch":  # not the downloads
            lent.append(lease.region.id)
        return lease

    monkeypatch.setattr(client.regions, "borrow", recording_borrow)

    def source():
        for i in range(n):
            yield {"x": np.full((128, 1024), i, np.float32), "y": np.arange(1000) + i}

    with Moved(daemon) as moved:
        seen = []
        it = DevicePlacement().prefetch_to_device(source(), buffer_size=2)
        for batch in it:
            i = int(np.asarray(batch["x"])[0, 0])
            np.testing.assert_array_equal(np.asarray(batch["y"]), np.arange(1000) + i)
            seen.append(i)
    assert seen == list(range(n))  # in order, every batch once
    assert it.stats.batches_staged == n
    assert moved.into >= n * (128 * 1024 * 4 + 1000 * 8)  # every batch came through a region
    assert len(lent) == n  # one region per batch ...
    assert len(set(lent)) <= 4  # ... from a ring of a few (buffer_size 2 + the one being filled)


def test_prefetch_forced_paths_give_the_same_batches(daemon, by_path):
    for path in ("region", "stream"):
        with Moved(daemon) as moved:
            it = DevicePlacement(client=by_path[path]).prefetch_to_device(
                ({"a": np.arange(7 * 5, dtype=np.int8).reshape(7, 5) + i} for i in range(5)),
                buffer_size=1)
            got = [np.asarray(b["a"]) for b in it]
        for i, g in enumerate(got):
            np.testing.assert_array_equal(g, np.arange(35, dtype=np.int8).reshape(7, 5) + i)
        assert moved.into == (5 * 35 if path == "region" else 0)


def test_prefetch_cancelled_mid_stream_returns_its_ring(client):
    it = DevicePlacement().prefetch_to_device(
        ({"x": np.ones((256, 1024), np.float32)} for _ in range(100)), buffer_size=2)
    next(it)
    it.close()
    # Every staging region is back in the pool (or unregistered): none is lent.
    free = {r.id for r in client.regions.free_regions()}
    assert not {r.id for r in list(client.regions._made) if not r.closed} - free


# --- A daemon that forgot the pool's regions ------------------------------------------------
def test_a_restarted_daemon_gets_fresh_regions(daemon, tmp_path):
    target = f"unix:{tmp_path}/p.sock"
    x = np.arange(MIB // 8, dtype=np.float32)  # 512 KiB: staged ("auto" writes 1 MiB in place)
    first = LocalDaemon(daemon.binary, listen=target)
    try:
        c = placement.Client(target)
        r = placement.device_put(x, 0, client=c)  # a staging region, kept in the pool
        np.testing.assert_array_equal(np.asarray(r), x)
        r.keep()
        (old,) = c.regions.free_regions()
    finally:
        first.stop()
    with LocalDaemon(daemon.binary, listen=target) as second:
        assert len(c.list_devices()) == 8  # reconnected (retried on UNAVAILABLE)
        # The new daemon never saw the pool's region: NOT_FOUND naming it, nothing
        # committed, so the pool starts afresh and the upload runs again.
        r = placement.device_put(x, 0, client=c)
        np.testing.assert_array_equal(np.asarray(r), x)
        assert old.closed and old not in c.regions.free_regions()
        assert c.status().num_regions == 1
        r.delete()
        c.close()
        assert second.process.poll() is None


def test_a_moved_region_socket_is_asked_again(daemon, client, by_path):
    c = by_path["auto"]
    c.regions.use_region(TransferPath.AUTO, MIB)  # same-host check done, socket known
    c.regions._socket = "@placementd-regions-moved-away"  # as after a restart over TCP
    big = np.arange(48 * MIB // 8, dtype=np.int64)  # bigger than any free region: a new one
    tree = {"big": big, "small": np.ones(8, np.int64)}  # two leaves: staged, one region
    with Moved(daemon) as moved:
        r = placement.device_put(tree, 1, client=c)
    assert moved.into == big.nbytes + 64
    assert c.regions._socket == client.status().region_socket
    placement.delete(r)
    # Written in place, the token is redeemed on the socket asked again.
    c.regions._socket = "@placementd-regions-moved-away"
    in_place = c.tensors.inplace.stats().uploads
    r = placement.device_put(big, 1, client=c)
    assert c.tensors.inplace.stats().uploads == in_place + 1
    assert c.regions._socket == client.status().region_socket
    np.testing.assert_array_equal(r.to_numpy(), big)
    r.delete()


# --- The pool and closing ----------------------------------------------------------------
def test_pool_keeps_at_most_8_free_regions(client):
    c = placement.Client(client.target, TransportOptions(transfer_path="region"))
    leases = [c.regions.lease_for(TransferPath.REGION, MIB) for _ in range(10)]
    assert len({lease.region.id for lease in leases}) == 10
    ids = {lease.region.id for lease in leases}
    for lease in leases:
        lease.release()
    free = c.regions.free_regions()
    assert len(free) == _region_pool.MAX_FREE_REGIONS
    listed = {r.id for r in regions.list_regions(c)}
    assert len(ids & listed) == 8  # the two dropped were unregistered
    big = c.regions.lease_for(TransferPath.REGION, 3 * MIB + 1)
    assert big.region.size == 4 * MIB  # rounded up to a MiB
    big.release()
    small = c.regions.lease_for(TransferPath.REGION, 100)
    assert small.region.size == MIB  # the smallest that fits
    small.release()
    assert c.regions.lease_for(TransferPath.AUTO, 100) is None  # under 256 KiB: the stream
    assert c.regions.lease_for(TransferPath.STREAM, 64 * MIB) is None
    c.close()
    assert not ids & {r.id for r in regions.list_regions(client)}


def test_close_unregisters_every_region(daemon, client):
    # The regions of c's session are c's to list; the daemon's count covers everyone's.
    before = client.status().num_regions
    c = placement.Client(client.target)
    r = placement.device_put(np.ones(512 * KIB, np.uint8), 0, client=c)  # a staging region
    np.asarray(r)
    mine = SharedRegion(MIB, client=c)
    it = DevicePlacement(client=c).prefetch_to_device(
        ({"x": np.ones(MIB, np.uint8)} for _ in range(10)), buffer_size=2)
    next(it)  # ring regions lent to the stream
    now = {x.id for x in regions.list_regions(c)}
    assert mine.id in now and len(now) >= 2
    assert all(x.session_id == c.session_id for x in regions.list_regions(c))
    it.close()
    now = {x.id for x in regions.list_regions(c)}
    assert client.status().num_regions == before + len(now)
    c.close()
    assert client.status().num_regions == before
    assert mine.closed
    # A separate daemon, one client: back to zero.
    with LocalDaemon(daemon.binary) as own:
        c = placement.Client(own.address)
        placement.device_put(np.ones(512 * KIB, np.uint8), 0, client=c).delete()
        assert c.status().num_regions == 1
        c.close()
        other = placement.Client(own.address)
        assert other.status().num_regions == 0 and regions.list_regions(other) == []
        other.close()
