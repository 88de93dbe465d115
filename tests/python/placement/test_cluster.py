"""The package against a real 2-daemon cluster (2 x 4 CPU devices, global
ids 0..7, process p holding 4p..4p+3): JAX's multi-process API, multi-
controller uploads from two "trainers" (threads, each with its own client
on its own daemon) checked against JAX's layout, global_to_host_array per
node, the errors loadax / JAX give, multi-controller all_reduce_gradients
against the single-node result (the suite's lone 8-device daemon), and
single-controller collectives on a mesh spanning both daemons."""
import concurrent.futures
import gc
import time

import numpy as np
import pytest

import placement
from placement import (DataParallel, DataPartitionType, Mesh, NamedSharding, PartitionSpec as P,
                       collectives, errors, global_to_host_array, host_to_global_device_array,
                       make_array_from_process_local_data)
from placement.testing import LocalCluster

from conftest import DEVICE_MEMORY, check_alive

PROCESSES = 2
LOCAL = 4


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(PROCESSES, LOCAL, args=[f"--cpu_device_memory={DEVICE_MEMORY}"]) as c:
        yield c
        for d in c.daemons:
            check_alive(d)


@pytest.fixture(scope="module")
def trainers(cluster):
    """One client per daemon: trainer p talks to process p's daemon."""
    clients = [placement.Client(a) for a in cluster.addresses]
    yield clients
    for c in clients:
        c.close()


def own_memory(c):
    return {d.id: d.memory_in_use_bytes for d in c.list_devices()
            if d.process_index == c.process_index}


@pytest.fixture(autouse=True)
def no_leaks(trainers, client):
    """Every daemon's own devices back to zero after each test (the
    conftest's check, for the cluster and the lone daemon)."""
    yield
    gc.collect()
    for c in [*trainers, client]:
        c.flush()
    deadline = time.monotonic() + 10
    while True:
        left = [own_memory(c) for c in [*trainers, client]]
        if all(v == 0 for m in left for v in m.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    assert all(v == 0 for m in left for v in m.values()), f"device memory not freed: {left}"


def on_every_process(trainers, fn):
    """fn(p, client) on one thread per trainer, at once; their results in
    process order, or the first trainer's exception."""
    with concurrent.futures.ThreadPoolExecutor(len(trainers)) as pool:
        futures = [pool.submit(fn, p, c) for p, c in enumerate(trainers)]
        return [f.result() for f in futures]


def each_outcome(trainers, fn):
    """Like on_every_process, but every trainer's result or exception."""
    def wrapped(p, c):
        try:
            return fn(p, c)
        except Exception as e:  # noqa: BLE001 - the test inspects it
            return e
    return on_every_process(trainers, wrapped)


def delete_all(*arrays):
    """Every trainer's handles, once every trainer is done with them."""
    for tree in arrays:
        placement.delete(tree)


def grid(c, shape=(2, 4), names=("x", "y")):
    """A mesh of the 8 global devices in id order: axis "x" splits the
    processes, "y" the devices of one."""
    return Mesh(np.array(placement.devices(client=c)).reshape(shape), names)


def jax_boxes(spec, mesh_shape, names, shape):
    """device id -> box, from JAX's NamedSharding.devices_indices_map on 8
    forced CPU devices in the daemons' id order."""
    jax = pytest.importorskip("jax")
    devices = jax.devices()
    assert len(devices) == 8
    jmesh = jax.sharding.Mesh(np.array(devices).reshape(mesh_shape), names)
    jspec = jax.sharding.PartitionSpec(*spec)
    index_map = jax.sharding.NamedSharding(jmesh, jspec).devices_indices_map(shape)
    return {d.id: tuple(s.indices(n)[:2] for s, n in zip(index_map[d], shape))
            for d in devices}


def boxes(array):
    return {s.device_id: tuple(sl.indices(n)[:2] for sl, n in zip(s.index, array.shape))
            for s in array.global_shards}


# --- Who am I -------------------------------------------------------------------------
def test_process_api(trainers, client):
    for p, c in enumerate(trainers):
        assert placement.process_index(client=c) == p
        assert placement.process_count(client=c) == 2
        assert placement.process_indices(client=c) == [0, 1]
        every = placement.devices(client=c)
        assert [d.id for d in every] == list(range(8))
        assert [d.process_index for d in every] == [0] * 4 + [1] * 4
        assert [d.id for d in placement.local_devices(client=c)] == list(range(4 * p, 4 * p + 4))
        assert [d.id for d in placement.local_devices(1 - p, client=c)] == \
            list(range(4 * (1 - p), 4 * (1 - p) + 4))
        assert placement.local_device_count(client=c) == 4
        assert placement.device_count(client=c) == 8
    assert (placement.process_index(client=client), placement.process_count(client=client)) == \
        (0, 1)
    assert len(placement.local_devices(client=client)) == 8


# --- Multi-controller uploads -------------------------------------------------------
def test_host_to_global_device_array_from_two_trainers(trainers):
    locals_ = [{"x": np.arange(16 * 3, dtype=np.float32).reshape(16, 3) + 1000 * p,
                "y": np.arange(16, dtype=np.int64) + 100 * p} for p in range(2)]

    def trainer(p, c):
        with grid(c):
            batch = host_to_global_device_array(locals_[p], global_name="h2g/full", client=c)
        return batch, global_to_host_array(batch)

    (b0, rows0), (b1, rows1) = on_every_process(trainers, trainer)
    try:
        assert b0["x"].id == b1["x"].id and b0["y"].id == b1["y"].id
        assert b0["x"].name == "h2g/full/x"
        assert b0["x"].shape == (32, 3) and b1["y"].shape == (32,)  # loadax: rows x processes
        assert b0["x"].sharding.spec == P(("x", "y"))
        assert boxes(b0["x"]) == jax_boxes(P(("x", "y")), (2, 4), ("x", "y"), (32, 3))
        assert boxes(b1["y"]) == jax_boxes(P(("x", "y")), (2, 4), ("x", "y"), (32,))
        # Each trainer addresses its own daemon's devices only.
        assert [s.device_id for s in b0["x"].addressable_shards] == [0, 1, 2, 3]
        assert [s.device_id for s in b1["x"].addressable_shards] == [4, 5, 6, 7]
        assert not b0["x"].is_fully_addressable and len(b0["x"].devices()) == 8
        np.testing.assert_array_equal(np.asarray(b0["x"]),
                                      np.concatenate([locals_[0]["x"], locals_[1]["x"]]))
        np.testing.assert_array_equal(b1["x"].global_shards[2].data, locals_[0]["x"][8:12])
        for p, rows in enumerate((rows0, rows1)):  # global_to_host_array: each node's rows
            np.testing.assert_array_equal(rows["x"], locals_[p]["x"])
            np.testing.assert_array_equal(rows["y"], locals_[p]["y"])
    finally:
        delete_all(b0, b1)


def test_large_parts_through_same_host_regions(trainers):
    """1 MiB per node: the default "auto" path hands it over in a shared
    region (the daemons run on this host), both ways."""
    parts = [np.random.default_rng(p).standard_normal((256, 1024)).astype(np.float32)
             for p in range(2)]

    def trainer(p, c):
        batch = host_to_global_device_array({"x": parts[p]}, mesh=grid(c),
                                            global_name="h2g/large", client=c)
        return batch, global_to_host_array(batch), c.status().num_regions

    results = on_every_process(trainers, trainer)
    try:
        for p, (_, rows, regions) in enumerate(results):
            np.testing.assert_array_equal(rows["x"], parts[p])
            assert regions > 0
        np.testing.assert_array_equal(np.asarray(results[1][0]["x"]), np.concatenate(parts))
    finally:
        delete_all(*[r[0] for r in results])


def test_whole_downloads_are_read_in_place_only_from_the_daemon_holding_every_shard(trainers):
    """A tensor spanning both daemons downloads as before (its shards are
    not all on the client's daemon) and transfer_path='inplace' refuses it;
    one wholly on process 1 is read in place through process 1's daemon."""
    c0, c1 = trainers
    mesh = Mesh(np.array(placement.devices(client=c0)), ("data",))
    a = np.random.default_rng(3).standard_normal((512, 1024)).astype(np.float32)  # 2 MiB
    made = []
    try:
        x = placement.device_put(a, NamedSharding(mesh, P("data")), client=c0)
        made.append(x)
        before = c0.tensors.inplace.stats()
        np.testing.assert_array_equal(x.to_numpy(), a)
        after = c0.tensors.inplace.stats()
        assert (after.downloads, after.download_fallbacks) == (before.downloads,
                                                               before.download_fallbacks)
        with pytest.raises(errors.FailedPreconditionError, match="other daemons"):
            c0.tensors.download(x.id, info=x._info, path="inplace")
        y = placement.device_put(a, 5, client=c1)  # global device 5: process 1's
        made.append(y)
        before = c1.tensors.inplace.stats()
        np.testing.assert_array_equal(y.to_numpy(), a)
        assert c1.tensors.inplace.stats().downloads == before.downloads + 1
    finally:
        delete_all(*made)


def test_host_to_global_device_array_replicated(trainers):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)

    def trainer(p, c):
        batch = host_to_global_device_array({"x": x}, DataPartitionType.REPLICATED,
                                            mesh=grid(c), global_name="h2g/rep", client=c)
        return batch, global_to_host_array(batch, DataPartitionType.REPLICATED)

    (b0, r0), (b1, r1) = on_every_process(trainers, trainer)
    try:
        assert b0["x"].shape == (4, 3) and b0["x"].is_fully_replicated()
        np.testing.assert_array_equal(r0["x"], x)
        np.testing.assert_array_equal(r1["x"], x)
    finally:
        delete_all(b0, b1)


# (spec, local shape, the global array made of the two processes' parts,
# whether the processes hold the same data: JAX requires it where they
# address the same slices)
LAYOUTS = [
    (P(("x", "y")), (8, 3), lambda a, b: np.concatenate([a, b], 0), False),
    (P("x"), (2, 5), lambda a, b: np.concatenate([a, b], 0), False),
    (P("y", "x"), (4, 3), lambda a, b: np.concatenate([a, b], 1), False),
    (P(None, "x"), (3, 2), lambda a, b: np.concatenate([a, b], 1), False),
    (P("y"), (8, 2), lambda a, b: a, True),  # 'y' stays within a process: global = local
    (P(), (2, 2), lambda a, b: a, True),
]


@pytest.mark.parametrize("spec,local_shape,combine,same", LAYOUTS,
                         ids=[repr(layout[0]) for layout in LAYOUTS])
def test_make_array_from_process_local_data_matches_jax(trainers, spec, local_shape, combine,
                                                        same):
    parts = [np.arange(np.prod(local_shape), dtype=np.float32).reshape(local_shape) +
             (0 if same else 100 * p) for p in range(2)]
    expected = combine(*parts)

    def trainer(p, c):
        return make_array_from_process_local_data(NamedSharding(grid(c), spec), parts[p],
                                                  global_name=f"layout/{spec!r}", client=c)

    a0, a1 = on_every_process(trainers, trainer)
    try:
        assert a0.id == a1.id
        assert a0.shape == expected.shape
        assert boxes(a0) == jax_boxes(spec, (2, 4), ("x", "y"), expected.shape)
        np.testing.assert_array_equal(np.asarray(a1), expected)
        for shard in a0.global_shards:  # every device holds its box of the global array
            np.testing.assert_array_equal(shard.data, expected[shard.index])
    finally:
        delete_all(a0, a1)


def test_make_array_with_global_shape(trainers):
    def trainer(p, c):
        return make_array_from_process_local_data(
            NamedSharding(grid(c), P("x")), np.full((2, 3), p, np.int32), (4, 3),
            global_name="explicit-shape", client=c)

    a0, a1 = on_every_process(trainers, trainer)
    try:
        np.testing.assert_array_equal(np.asarray(a0), np.repeat([[0], [0], [1], [1]], 3, 1))
    finally:
        delete_all(a0, a1)


# --- Errors ---------------------------------------------------------------------------
def test_errors_as_loadax_and_jax_give_them(trainers):
    c0 = trainers[0]
    mesh = grid(c0)
    # loadax: each host's rows must divide by its own device count (4 here).
    with pytest.raises(errors.InvalidArgumentError) as e:
        host_to_global_device_array({"x": np.ones((10, 3), np.float32)}, mesh=mesh,
                                    global_name="indivisible", client=c0)
    assert "([10,3]) cannot be sharded across 4 devices." in str(e.value)
    assert isinstance(e.value, ValueError)
    with pytest.raises(NotImplementedError) as e:
        host_to_global_device_array({"x": np.ones((8,))}, "rows", mesh=mesh, global_name="n",
                                    client=c0)
    assert str(e.value) == "Unsupported partition: rows"
    # JAX: a local dimension must be the global one or what the process addresses (2 rows).
    with pytest.raises(errors.InvalidArgumentError) as e:
        make_array_from_process_local_data(NamedSharding(mesh, P("x")),
                                           np.ones((3, 2), np.float32), (4, 2),
                                           global_name="bad-host-data", client=c0)
    assert "Invalid host data, each dimension should match either global or process shape. " \
        "In dimension 0, the process data has 3 elements. Process addresses 2 elements and " \
        "global_shape=(4, 2)." in str(e.value)
    with pytest.raises(errors.InvalidArgumentError) as e:
        host_to_global_device_array({"x": np.ones((8,))}, mesh=mesh, global_name="", client=c0)
    assert str(e.value) == "process_local.global_name is 0 bytes; it must be 1..256"
    with pytest.raises(errors.InvalidArgumentError) as e:
        DataParallel(client=c0, controller="sideways")
    assert str(e.value) == "controller is 'sideways'; expected 'single' or 'multi'"


def test_processes_that_disagree(trainers):
    def trainer(p, c):
        return make_array_from_process_local_data(
            NamedSharding(grid(c), P(("x", "y"))), np.ones((8, 3 - p), np.float32),
            global_name="disagree", client=c)

    outcomes = each_outcome(trainers, trainer)
    for got in outcomes:
        assert isinstance(got, errors.InvalidArgumentError), got
        message = str(got)
        assert "process 0 uploads" in message or "process 1 uploads" in message, message
        assert "but process" in message and "f32[16,3]" in message and "f32[16,2]" in message


def test_missing_process_times_out(trainers):
    c0 = trainers[0]
    started = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError) as e:
        make_array_from_process_local_data(NamedSharding(grid(c0), P("x")),
                                           np.ones((2, 2), np.float32), global_name="alone",
                                           timeout=0.5, client=c0)
    assert time.monotonic() - started < 10
    assert "process(es) 1 did not arrive" in str(e.value)
    assert isinstance(e.value, TimeoutError)


def test_sync_global_devices(trainers):
    on_every_process(trainers, lambda p, c: placement.sync_global_devices("here", client=c))
    with pytest.raises(errors.DeadlineExceededError):
        placement.sync_global_devices("alone", timeout=0.3, client=trainers[1])


# --- Collectives -----------------------------------------------------------------------
def test_multi_controller_all_reduce_gradients_equals_single_node(trainers, client):
    rng = np.random.default_rng(7)
    per_device = {"w": rng.standard_normal((8, 3)).astype(np.float32),
                  "b": rng.standard_normal((8, 1)).astype(np.float32)}

    # Single node: the lone 8-device daemon reduces the 8 gradient blocks.
    lone_mesh = Mesh(np.array(placement.devices(client=client)), ("batch",))
    stacked = DataParallel(client=client).shard_batch(per_device,
                                                      NamedSharding(lone_mesh, P("batch")))
    single = {reduce: {k: np.asarray(v) for k, v in
                       DataParallel(client=client).all_reduce_gradients(stacked, reduce).items()}
              for reduce in ("mean", "sum")}
    delete_all(stacked)

    def trainer(p, c):
        mesh = Mesh(np.array(placement.devices(client=c)), ("batch",))
        mine = {k: v[4 * p:4 * p + 4] for k, v in per_device.items()}  # this node's 4 devices
        grads = {k: make_array_from_process_local_data(NamedSharding(mesh, P("batch")), v,
                                                       global_name=f"grads/{k}", client=c)
                 for k, v in mine.items()}
        mean = DataParallel(client=c).all_reduce_gradients(grads, controller="multi")
        total = DataParallel(client=c, controller="multi").all_reduce_gradients(grads, "sum")
        return grads, mean, total, {k: np.asarray(v) for k, v in mean.items()}, \
            {k: np.asarray(v) for k, v in total.items()}

    results = on_every_process(trainers, trainer)
    try:
        (g0, mean0, total0, _, _), (g1, mean1, _, _, _) = results
        assert mean0["w"].id == mean1["w"].id  # the two calls met and ran once
        assert g0["w"].shape == (8, 3) and mean0["w"].shape == (1, 3)
        assert mean0["w"].is_fully_replicated()
        for _, _, _, mean, total in results:
            for k in per_device:
                np.testing.assert_allclose(mean[k], single["mean"][k], rtol=1e-6, atol=1e-7)
                np.testing.assert_allclose(total[k], single["sum"][k], rtol=1e-6, atol=1e-7)
                np.testing.assert_allclose(mean[k], per_device[k].mean(0, keepdims=True),
                                           rtol=1e-5, atol=1e-6)
    finally:
        delete_all(*[r[:3] for r in results])


def test_single_controller_collectives_on_a_spanning_mesh(trainers):
    c0, c1 = trainers
    mesh = Mesh(np.array(placement.devices(client=c0)), ("data",))
    a = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
    made = []
    try:
        x = placement.device_put(a, NamedSharding(mesh, P("data")), client=c0)
        made.append(x)
        assert {s.process_index for s in x.info.shards} == {0, 1}
        total = collectives.all_reduce(x, "sum", "data")
        made.append(total)
        np.testing.assert_array_equal(np.asarray(total), a.sum(0, keepdims=True))
        # The same id read through the other daemon.
        seen = placement.RemoteArray(c1, c1.tensors.describe(total.id), owned=False)
        np.testing.assert_array_equal(np.asarray(seen), a.sum(0, keepdims=True))
        gathered = collectives.all_gather(x, dim=0)
        made.append(gathered)
        assert gathered.is_fully_replicated()
        np.testing.assert_array_equal(gathered.global_shards[6].data, a)

        pieces = [placement.device_put(np.full((8, 2), float(i), np.float32), i, client=c0)
                  for i in range(8)]
        partial = placement.make_array_from_single_device_arrays(
            (8, 2), NamedSharding(mesh, P(), partial_axes=("data",)), pieces, donate=True)
        made.append(partial)
        scattered = collectives.reduce_scatter(partial, "sum", scatter_dim=0)
        made.append(scattered)
        assert scattered.sharding.spec == P("data")
        np.testing.assert_array_equal(np.asarray(scattered), np.full((8, 2), 28.0))
        root = collectives.broadcast(partial, root_device=5)
        made.append(root)
        np.testing.assert_array_equal(root.global_shards[1].data, np.full((8, 2), 5.0))

        grads = DataParallel(client=c0).shard_batch({"g": a}, NamedSharding(
            Mesh(np.array(placement.devices(client=c0)), ("batch",)), P("batch")))
        made.append(grads)
        mean = DataParallel(client=c0).all_reduce_gradients(grads)  # single: the default
        made.append(mean)
        np.testing.assert_allclose(np.asarray(mean["g"]), a.mean(0, keepdims=True))
    finally:
        delete_all(*made)
