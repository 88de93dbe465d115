"""One trainer of a data-parallel linear regression over placementd: run it
once per node, each against that node's daemon; against a lone daemon it is
the single-node run of the same training.

The model y = X w + b is trained with minibatch gradient descent on
synthetic data whose exact solution is known (w* = [2, -3, 0.5], b* = 1).
Every trainer makes the same global batches from the same seed and keeps
only its node's rows. Each step, on every node at once (JAX's
multi-controller model):

  1. host_to_global_device_array(its rows, global_name="batch/<step>"): the
     node's part of the global batch, dimension 0 split over the mesh of
     every device of the cluster (loadax FULL); the calls of all nodes meet
     and make one global array.
  2. For each of its devices' shards (addressable_shards: this node's
     only), the device's gradient [dL/dw, dL/db] and loss -- computed HERE,
     on the client: the daemon has no kernels.
  3. make_array_from_process_local_data(P("batch"), its gradients,
     global_name="grads/<step>"): one row per device of the cluster.
  4. DataParallel(controller="multi").all_reduce_gradients(.., "mean"): the
     daemons average the rows across nodes (Gloo between daemons); every
     trainer gets the same replicated mean, reads its node's copy
     (global_to_host_array REPLICATED) and applies the same update.

A global tensor is one tensor on every node, so a trainer deletes one only
when every trainer is past it: the batch once the gradients met (step 3),
the gradients once the all-reduce returned, the mean at the next step's
batch (or the final sync_global_devices).

    python train.py --target=127.0.0.1:50051 [--out=result.json]

Prints the loss and weights every --log_every steps; writes the weights at
those steps to --out (JSON); exits 0 when w and b are within --tolerance of
the solution, 1 otherwise.
"""
import argparse
import json
import sys

import numpy as np

import placement
from placement import (DataParallel, DataPartitionType, Mesh, NamedSharding, PartitionSpec,
                       global_to_host_array, host_to_global_device_array,
                       make_array_from_process_local_data)

TRUE_W = np.array([2.0, -3.0, 0.5], np.float32)
TRUE_B = np.float32(1.0)


def make_batches(count, rows, seed=42):
    """`count` global batches of `rows` rows (the same on every trainer)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, size=(count, rows, TRUE_W.size)).astype(np.float32)
    y = (x @ TRUE_W + TRUE_B).astype(np.float32)
    return x, y


def device_gradient(x, y, params):
    """d(mean squared error)/d[w, b] on one device's rows, and its loss."""
    err = x @ params[:-1] + params[-1] - y
    grad = np.empty(params.size + 1, np.float32)
    grad[:-2] = 2.0 * (err[:, None] * x).mean(0)
    grad[-2] = 2.0 * err.mean()
    grad[-1] = (err * err).mean()  # averaged with the gradient: the global loss
    return grad


def log(who, step, loss, params):
    print(f"{who} step {step:4d}  loss {loss:.3e}  w = [{params[0]:.4f}, {params[1]:.4f}, "
          f"{params[2]:.4f}]  b = {params[3]:.4f}", flush=True)


def main(argv=None):
    flags = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    flags.add_argument("--target", default="127.0.0.1:50051", help="this node's placementd")
    flags.add_argument("--samples_per_device", type=int, default=32)
    flags.add_argument("--batches", type=int, default=4, help="distinct global batches, cycled")
    flags.add_argument("--steps", type=int, default=150)
    flags.add_argument("--learning_rate", type=float, default=0.5)
    flags.add_argument("--tolerance", type=float, default=1e-3)
    flags.add_argument("--log_every", type=int, default=25)
    flags.add_argument("--timeout", type=float, default=120.0,
                       help="seconds to wait for the other trainers at each meeting")
    flags.add_argument("--out", default="", help="write the weights at each logged step here")
    args = flags.parse_args(argv)

    placement.connect(args.target, timeout=args.timeout)
    process, processes = placement.process_index(), placement.process_count()
    devices = placement.devices()
    mesh = Mesh(np.array(devices), ("batch",))  # every device of the cluster, by global id
    mine = [i for i, d in enumerate(devices) if d.process_index == process]
    assert mine == list(range(mine[0], mine[-1] + 1)), "a node's devices are contiguous"
    rows = args.samples_per_device
    lo, hi = mine[0] * rows, (mine[-1] + 1) * rows  # this node's rows of each global batch
    xs, ys = make_batches(args.batches, len(devices) * rows)
    who = f"[process {process} of {processes}, devices {mine[0]}..{mine[-1]}]"
    print(f"{who} rows {lo}..{hi - 1} of each {len(devices) * rows}-row batch", flush=True)

    dp = DataParallel(controller="multi")
    grad_sharding = NamedSharding(mesh, PartitionSpec("batch"))
    params = np.zeros(TRUE_W.size + 1, np.float32)
    history = {}
    last_mean = None
    for step in range(args.steps):
        k = step % args.batches
        batch = host_to_global_device_array({"x": xs[k, lo:hi], "y": ys[k, lo:hi]}, mesh=mesh,
                                            global_name=f"batch/{step}", timeout=args.timeout)
        if last_mean is not None:  # every trainer has read it: they all reached this batch
            last_mean.delete()
        local = np.stack([device_gradient(sx.data, sy.data, params) for sx, sy in
                          zip(batch["x"].addressable_shards, batch["y"].addressable_shards)])
        grads = make_array_from_process_local_data(grad_sharding, local,
                                                   global_name=f"grads/{step}",
                                                   timeout=args.timeout)
        placement.delete(batch)  # every trainer has read its shards: they all sent gradients
        mean = dp.all_reduce_gradients({"grad": grads}, "mean")["grad"]
        grads.delete()  # the all-reduce ran once every trainer had called it
        reduced = global_to_host_array({"g": mean}, DataPartitionType.REPLICATED)["g"][0]
        if step % args.log_every == 0:
            history[step] = params.tolist()
            log(who, step, float(reduced[-1]), params)
        params -= np.float32(args.learning_rate) * reduced[:-1]
        last_mean = mean
    history[args.steps] = params.tolist()
    placement.sync_global_devices("linear_regression/done", timeout=args.timeout)
    if last_mean is not None:
        last_mean.delete()

    worst = float(max(np.abs(params[:-1] - TRUE_W).max(), abs(params[-1] - TRUE_B)))
    converged = worst <= args.tolerance
    print(f"{who} {'converged' if converged else 'NOT converged'}: w = [{params[0]:.5f}, "
          f"{params[1]:.5f}, {params[2]:.5f}] b = {params[3]:.5f} (solution [2, -3, 0.5], 1; "
          f"max error {worst:.2e})", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"process_index": process, "process_count": processes,
                       "devices": len(devices), "params": params.tolist(),
                       "history": history, "max_error": worst}, f)
    return 0 if converged else 1


if __name__ == "__main__":
    sys.exit(main())
