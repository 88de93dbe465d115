"""Upload throughput of the Python client against the C++ client, same
daemon, same run.

Starts a CPU-backend placementd (port 0), then alternates rep by rep:
  * C++:    build/bin/remote_upload_bench --reps=2 (TensorClient::Upload from
            one host buffer; timed inside the process, connect excluded; the
            second upload is the one counted, see below)
  * Python: placement's TensorService upload of a numpy array of the same size
            to the same device (connect excluded)
Both clients take their default path, TransferPath auto: against this
same-host daemon that is the pooled staging region (docs/api/regions.md).
A fresh C++ process makes its pool's region during its first upload, so its
second upload is the one compared with the Python client's (whose pool is
warm after its first rep). --python_path=stream times the Python gRPC
stream instead (python/bench/region_bench.py compares both paths of both
clients).
and prints best / median MB/s of each and the ratios python / C++, plus
each client's own CPU time per upload (user + system, all threads: what
machine load does not inflate) and its ratio.

    build/venv/bin/python python/bench/upload_bench.py [--size_mib=256] [--reps=7]
        [--chunk_bytes=1048576] [--placementd=build/bin/placementd]
        [--cpp=build/bin/remote_upload_bench] [--python_path=auto|stream|region]
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

import placement
from placement import _placing
from placement.testing import LocalDaemon

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size_mib", type=int, default=256)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--chunk_bytes", type=int, default=1 << 20)
    parser.add_argument("--placementd", default=os.path.join(ROOT, "build/bin/placementd"))
    parser.add_argument("--cpp", default=os.path.join(ROOT, "build/bin/remote_upload_bench"))
    parser.add_argument("--python_path", default="auto", choices=["auto", "stream", "region"])
    args = parser.parse_args()
    size = args.size_mib << 20
    memory = 2 * size + (64 << 20)
    with LocalDaemon(args.placementd, [f"--cpu_device_memory={memory}"]) as daemon:
        client = placement.connect(daemon.address, chunk_bytes=args.chunk_bytes,
                                   timeout=600)
        data = np.zeros(size // 4, dtype=np.float32)
        data.view(np.uint8)[::4096] = 1  # touch every page once
        rule = _placing.device_rule(0)
        cpp, py, cpp_cpu, py_cpu = [], [], [], []
        for _ in range(args.reps):
            out = subprocess.run(
                [args.cpp, f"--target={daemon.address}", f"--size_mib={args.size_mib}",
                 "--reps=2", f"--chunk_bytes={args.chunk_bytes}", "--device=0"],
                check=True, capture_output=True, text=True).stdout
            fields = out.splitlines()[-1].split()  # the second upload
            cpp.append(float(fields[1]))
            cpp_cpu.append(float(fields[5]))
            cpu_start = _cpu_seconds()
            start = time.perf_counter()
            info = client.tensors.upload(data, rule, path=args.python_path)
            py.append(time.perf_counter() - start)
            py_cpu.append(_cpu_seconds() - cpu_start)
            client.delete_tensors([info.id])
        client.close()

    def rate(seconds: float) -> float:
        return size / seconds / 1e6

    print(f"upload of {args.size_mib} MiB f32 to one device, {args.reps} reps, chunk "
          f"{args.chunk_bytes} B, C++ path auto, Python path {args.python_path}, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'client':<10} {'best MB/s':>10} {'median MB/s':>12}")
    for label, samples in (("C++", cpp), ("Python", py)):
        print(f"{label:<10} {rate(min(samples)):>10.0f} {rate(statistics.median(samples)):>12.0f}")
    best = min(cpp) / min(py)
    median = statistics.median(cpp) / statistics.median(py)
    print(f"python / C++ throughput: best {best:.2f}, median {median:.2f}")
    print(f"client CPU seconds per upload (median): C++ {statistics.median(cpp_cpu):.3f}, "
          f"Python {statistics.median(py_cpu):.3f}; C++ / Python "
          f"{statistics.median(cpp_cpu) / statistics.median(py_cpu):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
