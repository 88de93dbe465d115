"""Cold and warm transfers of the Python client against a cold and a warm
numpy copy of the same bytes, in one run (issue 25: "keep what our path adds
on a cold call small").

Starts a CPU-backend placementd (127.0.0.1 port 0), then per rep:
  * copy, cold:      np.copyto into a freshly allocated array (its pages
                     fault in, as the daemon's fresh device memory does);
  * copy, warm:      np.copyto into an array touched before, timed right
                     before the warm upload;
  * upload, cold:    the first device_put of a new Client (its channel is up)
                     into device memory the daemon has not used since its
                     start (the daemon is started afresh for every rep).
                     Written in place ("auto" and "inplace"): the daemon's
                     memory file is mapped here and its pages mapped in
                     during the call; staged ("region"): the staging region
                     is made, registered and faulted in during the call;
  * upload, cold + connect: the same, plus making the Client (its channel
                     up and the device list read) before it -- a new
                     process's first transfer from nothing (informational);
  * upload, warm:    the same client's next device_put, after the previous
                     tensor was deleted, as a training loop does (the
                     daemon's block cache hands the freed block back:
                     written in place through the mapping the client kept;
                     staged through the pool's region);
  * download, cold:  the new client's first to_numpy() (a new result array).
                     Read in place ("auto" and "inplace"; ExportShards
                     for_copy): the tensor's memory file is the one the
                     in-place upload mapped, so it is read through that
                     mapping; staged ("region"): the daemon copies into a
                     staging region, copied out once;
  * download, warm:  to_numpy(out=) into an array touched before, of the
                     warm upload's tensor.
Each row: median MB/s over the reps, and its ratio to the copy of the same
temperature. Targets (issue 25): cold transfer >= 0.8 x cold copy, warm
transfer >= 0.9 x warm copy.

    build/venv/bin/python python/bench/cold_warm_bench.py [--size_mib=256] [--reps=5]
        [--placementd=build/bin/placementd] [--path=auto|stream|region|inplace]

MB/s are 1e6 bytes per second.
"""
import argparse
import os
import statistics
import sys
import time
from typing import Callable, Dict, List

import numpy as np

import placement
from placement.testing import LocalDaemon

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size_mib", type=int, default=256)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--placementd", default=os.path.join(ROOT, "build/bin/placementd"))
    parser.add_argument("--path", default="auto",
                        choices=["auto", "stream", "region", "inplace"])
    args = parser.parse_args()
    size = args.size_mib << 20
    src = np.ones(size, np.uint8)  # touched: every run reads the same warm source
    warm_dst = np.zeros(size, np.uint8)
    samples: Dict[str, List[float]] = {k: [] for k in (
        "copy, cold", "copy, warm", "upload, cold", "upload, cold + connect", "upload, warm",
        "download, cold", "download, warm")}
    memory = 3 * size + (64 << 20)
    written_in_place = read_in_place = mapping_hits = 0
    for _ in range(args.reps):
        fresh = np.empty(size, np.uint8)
        samples["copy, cold"].append(timed(lambda: np.copyto(fresh, src)))
        del fresh
        with LocalDaemon(args.placementd, [f"--cpu_device_memory={memory}", "--cpu_devices=1"]) \
                as daemon:
            clients: List[placement.Client] = []

            def connect() -> None:
                clients.append(placement.Client(daemon.address, placement.TransportOptions(
                    transfer_path=args.path, timeout=600, session="none")))
                clients[0].devices()  # the device list is not part of the transfer

            connected = timed(connect)
            client = clients[0]
            holder: List[object] = []
            samples["upload, cold"].append(
                timed(lambda: holder.append(placement.device_put(src, 0, client=client))))
            samples["upload, cold + connect"].append(connected + samples["upload, cold"][-1])
            samples["download, cold"].append(timed(lambda: holder[0].to_numpy()))
            holder[0].delete()  # its block goes back to the daemon's cache, for this tenant
            holder.clear()
            # The warm copy right beside the warm transfers, under the same
            # conditions (the daemon up; timed before the daemon started,
            # right after the cold copy freed its array, it ran ~15% slower).
            samples["copy, warm"].append(timed(lambda: np.copyto(warm_dst, src)))
            samples["upload, warm"].append(
                timed(lambda: holder.append(placement.device_put(src, 0, client=client))))
            samples["download, warm"].append(timed(lambda: holder[0].to_numpy(out=warm_dst)))
            holder[0].delete()
            inplace = client.tensors.inplace.stats()
            written_in_place += inplace.uploads
            read_in_place += inplace.downloads
            mapping_hits += inplace.cache.hits
            client.close()

    def rate(seconds: List[float]) -> float:
        return size / statistics.median(seconds) / 1e6

    print(f"{args.size_mib} MiB, {args.reps} reps, path {args.path}, "
          f"load {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs; "
          f"{written_in_place} of {2 * args.reps} uploads written in place, "
          f"{read_in_place} of {2 * args.reps} downloads read in place, "
          f"{mapping_hits} transfers through a kept mapping")
    print(f"{'':<24} {'median MB/s':>12} {'x copy':>8} {'target':>8}")
    for name in samples:
        temperature = name.split(", ")[1].split(" ")[0]
        copy = rate(samples[f"copy, {temperature}"])
        line = f"{name:<24} {rate(samples[name]):>12.0f}"
        if not name.startswith("copy"):
            target = 0.8 if temperature == "cold" else 0.9
            line += f" {rate(samples[name]) / copy:>8.2f}"
            line += f" {target:>8.1f}" if "connect" not in name else f" {'-':>8}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
