"""Runs the 2-node data-parallel linear regression and the single-node one,
and checks they reach the same weights.

  1. single node: a lone placementd with P x D CPU devices and one trainer
     (train.py) against it;
  2. cluster: P placementd daemons with D devices each forming one cluster
     on loopback (process 0 the coordinator), and P trainer processes, each
     against its own node's daemon.

Both see the same P x D global devices and the same global batches, so
they must agree: at every logged step, every cluster trainer's weights are
the single-node run's within --agree (1e-5), and all converge.

    PLACEMENTD_BIN=build/bin/placementd python run_cluster.py

Exit status 0 when they agree, converged and left no device memory behind,
1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from placement.testing import LocalCluster, LocalDaemon

HERE = os.path.dirname(os.path.abspath(__file__))


def trainers(addresses, out_dir, tag, train_args):
    """One train.py per address, all at once; their JSON results."""
    started = time.monotonic()
    procs = []
    for i, address in enumerate(addresses):
        out = os.path.join(out_dir, f"{tag}-{i}.json")
        procs.append((out, subprocess.Popen(
            [sys.executable, os.path.join(HERE, "train.py"), f"--target={address}",
             f"--out={out}", *train_args])))
    failed = [p.args for _, p in procs if p.wait() not in (0, 1)]
    if failed:
        raise SystemExit(f"trainer failed: {failed}")
    print(f"{tag}: {len(addresses)} trainer(s) took {time.monotonic() - started:.1f} s",
          flush=True)
    results = []
    for out, _ in procs:
        with open(out) as f:
            results.append(json.load(f))
    return results


def leftover_bytes(addresses):
    """Device bytes still held on each daemon's own devices once the
    trainers exited (they must have freed everything)."""
    import placement
    left = {}
    for address in addresses:
        with placement.Client(address) as c:
            deadline = time.monotonic() + 5
            while True:
                held = sum(d.memory_in_use_bytes for d in c.list_devices()
                           if d.process_index == c.process_index)
                if held == 0 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            left[address] = held
    return left


def main():
    flags = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    flags.add_argument("--processes", type=int, default=2)
    flags.add_argument("--devices_per_process", type=int, default=4)
    flags.add_argument("--agree", type=float, default=1e-5,
                       help="largest accepted |cluster - single-node| weight difference")
    args, train_args = flags.parse_known_args()
    total = args.processes * args.devices_per_process
    with tempfile.TemporaryDirectory(prefix="cluster-lr-") as out_dir:
        with LocalDaemon(devices=total) as lone:
            single = trainers([lone.address], out_dir, "single-node", train_args)[0]
            left = leftover_bytes([lone.address])
        with LocalCluster(args.processes, args.devices_per_process) as cluster:
            nodes = trainers(cluster.addresses, out_dir, "cluster", train_args)
            left.update(leftover_bytes(cluster.addresses))

    worst = 0.0
    for node in nodes:
        assert node["history"].keys() == single["history"].keys()
        for step, weights in single["history"].items():
            worst = max(worst, float(np.abs(np.subtract(node["history"][step], weights)).max()))
    between = max(float(np.abs(np.subtract(n["history"][s], nodes[0]["history"][s])).max())
                  for n in nodes for s in n["history"])
    fmt = lambda p: "[" + ", ".join(f"{v:.7f}" for v in p) + "]"  # noqa: E731
    print(f"single node ({single['devices']} devices):   w, b = {fmt(single['params'])}")
    for n in nodes:
        print(f"cluster process {n['process_index']} of {n['process_count']}: "
              f"w, b = {fmt(n['params'])}")
    print(f"largest difference from the single-node run over the logged steps: {worst:.2e}; "
          f"between the cluster's trainers: {between:.2e}")
    converged = all(r["max_error"] <= 1e-3 for r in [single, *nodes])
    freed = all(v == 0 for v in left.values())
    print("device memory after the trainers exited: " +
          ", ".join(f"{a}: {v} bytes" for a, v in left.items()))
    ok = worst <= args.agree and converged and freed
    print("SAME WEIGHTS" if ok else "MISMATCH (or not converged)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
