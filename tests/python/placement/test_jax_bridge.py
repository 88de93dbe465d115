"""The JAX bridge on 8 forced CPU JAX devices (XLA_FLAGS set by conftest):
to_jax / from_jax round trips keep values and NamedSharding; JAX's own
Mesh / NamedSharding / devices drive the seed calls; jax.tree_util pytrees."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
from jax.sharding import Mesh as JaxMesh  # noqa: E402
from jax.sharding import NamedSharding as JaxNamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import ml_dtypes  # noqa: E402

import placement  # noqa: E402
from placement import DeviceMeshManager, DevicePlacement, errors  # noqa: E402


def test_jax_sees_eight_devices():
    assert jax.device_count() == 8


@pytest.mark.parametrize("spec", [P("data", "model"), P(None, "model"), P("model"), P(),
                                  P(("data", "model"))])
def test_round_trip_keeps_values_and_sharding(client, spec):
    mesh = JaxMesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    x = jax.device_put(np.arange(8 * 16, dtype=np.float32).reshape(8, 16),
                       JaxNamedSharding(mesh, spec))
    remote = placement.from_jax(x)
    assert remote.sharding.spec == placement.PartitionSpec(*spec)
    assert remote.sharding.mesh.device_ids.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    for ours, theirs in zip(remote.addressable_shards,
                            sorted(x.addressable_shards, key=lambda s: s.device.id)):
        assert ours.device.id == theirs.device.id and ours.index == theirs.index
    np.testing.assert_array_equal(np.asarray(remote), np.asarray(x))
    back = placement.to_jax(remote)
    assert isinstance(back, jax.Array)
    assert back.sharding == x.sharding
    np.testing.assert_array_equal(np.asarray(back), np.asarray(x))
    assert {s.device.id for s in back.addressable_shards} == set(range(8))


def test_bf16_and_single_device(client):
    x = jax.device_put(np.arange(6, dtype=ml_dtypes.bfloat16), jax.devices()[5])
    remote = placement.from_jax(x)
    assert remote.dtype == ml_dtypes.bfloat16 and remote.sharding.device_id == 5
    back = placement.to_jax(remote)
    assert back.dtype == jax.numpy.bfloat16 and back.devices() == {jax.devices()[5]}
    np.testing.assert_array_equal(np.asarray(back), np.asarray(x))


def test_daemon_sharding_to_jax(client):
    mesh = DeviceMeshManager().create_hybrid_mesh(4, 2)
    remote = DevicePlacement().shard_batch_dim({"x": np.arange(32.0).reshape(8, 4)}, mesh)["x"]
    x = placement.to_jax(remote)
    assert x.sharding.spec == P("data")
    assert x.sharding.mesh.axis_names == ("data", "model")
    np.testing.assert_array_equal(np.asarray(x), np.arange(32.0).reshape(8, 4))
    replicated = DevicePlacement().replicate_across_devices(np.ones(3), devices=[2, 3])
    assert placement.to_jax(replicated).devices() == {jax.devices()[2], jax.devices()[3]}


def test_partial_tensors_have_no_jax_form(client):
    mesh = DeviceMeshManager().create_data_parallel_mesh()
    pieces = [placement.device_put(np.ones(2, np.float32), i) for i in range(8)]
    partial = placement.make_array_from_single_device_arrays(
        (2,), placement.NamedSharding(mesh, placement.PartitionSpec(), partial_axes=("data",)),
        pieces, donate=True)
    with pytest.raises(errors.InvalidArgumentError):
        placement.to_jax(partial)


def test_seed_calls_accept_jax_objects(client):
    devices = jax.devices()
    mesh = JaxMesh(np.array(devices), axis_names=("data",))
    data_sharding = JaxNamedSharding(mesh, P("data", None))
    batch = {"images": jax.numpy.ones((8, 28, 28, 3)), "labels": np.zeros((8,))}
    out = placement.distribute_batch(batch, data_sharding)
    assert out["images"].sharding.spec == placement.PartitionSpec("data", None)
    assert out["images"].dtype == np.float32
    dp = DevicePlacement(default_device=devices[3])
    assert dp.place_on_device(np.ones(2)).sharding.device_id == 3
    assert dp.shard_batch_dim({"x": np.ones((16, 2))}, mesh)["x"].sharding.spec == \
        placement.PartitionSpec("data")
    r = dp.replicate_across_devices({"w": np.ones(4)}, devices=devices[:2])
    assert {s.device.id for s in r["w"].addressable_shards} == {0, 1}
    assert DeviceMeshManager(devices=devices[4:]).create_data_parallel_mesh().device_ids.tolist() \
        == [4, 5, 6, 7]
    with jax.set_mesh(mesh):
        g = placement.host_to_global_device_array({"x": np.arange(16)})
    assert g["x"].sharding.spec == placement.PartitionSpec(("data",))


@jax.tree_util.register_pytree_node_class
class Params:
    def __init__(self, w, b):
        self.w, self.b = w, b

    def tree_flatten(self):
        return (self.w, self.b), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


def test_registered_pytree_nodes(client):
    out = DevicePlacement().place_on_device(Params(np.ones((2, 2)), np.zeros(2)))
    assert isinstance(out, Params) and isinstance(out.w, placement.RemoteArray)
    back = jax.tree_util.tree_map(placement.to_jax, out,
                                  is_leaf=lambda x: isinstance(x, placement.RemoteArray))
    np.testing.assert_array_equal(np.asarray(back.w), np.ones((2, 2)))


AXIS_TYPES = [t for t in ("Auto", "Explicit", "Manual") if hasattr(jax.sharding, "AxisType")
              and hasattr(jax.sharding.AxisType, t)]


@pytest.mark.parametrize("axis_type", AXIS_TYPES)
def test_round_trip_keeps_the_mesh_axis_types(client, axis_type):
    # jax.make_mesh makes Explicit axes in JAX 0.10; to_jax used to rebuild Auto
    # ones, and x + to_jax(from_jax(x)) failed "Mesh for all inputs should be equal".
    kind = getattr(jax.sharding.AxisType, axis_type)
    mesh = JaxMesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"),
                   axis_types=(kind, kind))
    x = jax.device_put(np.arange(8 * 16, dtype=np.float32).reshape(8, 16),
                       JaxNamedSharding(mesh, P("data", "model")))
    remote = placement.from_jax(x)
    expected = None if axis_type == "Auto" else (axis_type.lower(),) * 2
    assert remote.sharding.mesh.axis_types == expected
    back = placement.to_jax(remote)
    assert back.sharding.mesh.axis_types == mesh.axis_types
    assert back.sharding == x.sharding
    if axis_type != "Manual":  # Manual axes are for shard_map bodies, not for jnp ops
        np.testing.assert_array_equal(np.asarray(back + x), 2 * np.asarray(x))


def test_make_mesh_round_trip_adds(client):
    mesh = jax.make_mesh((2, 4), ("data", "model"))
    x = jax.device_put(np.ones((8, 16), np.float32), JaxNamedSharding(mesh, P("data")))
    back = placement.to_jax(placement.from_jax(x))
    assert back.sharding.mesh == mesh
    np.testing.assert_array_equal(np.asarray(back + x), np.full((8, 16), 2, np.float32))


def test_mixed_axis_types_and_our_mesh(client):
    if len(AXIS_TYPES) < 2:
        pytest.skip("this JAX has no axis types")
    kinds = (jax.sharding.AxisType.Explicit, jax.sharding.AxisType.Auto)
    ours = placement.Mesh(np.arange(8).reshape(2, 4), ("data", "model"), kinds)
    assert ours.axis_types == ("explicit", "auto")
    remote = placement.device_put(np.ones((8, 4), np.float32),
                                  placement.NamedSharding(ours, placement.PartitionSpec("data")))
    back = placement.to_jax(remote)
    assert back.sharding.mesh.axis_types == kinds
    with pytest.raises(errors.InvalidArgumentError, match="axis type 'sideways'"):
        placement.Mesh(np.arange(2), ("x",), ("sideways",))
