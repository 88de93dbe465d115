"""Same-host region throughput of the Python client against its own gRPC
stream path and against the C++ client, in one run.

Starts a CPU-backend placementd (8 devices, 127.0.0.1 port 0, its default
abstract region socket), then, rep by rep (interleaved, so machine noise
hits every row alike):
  * Python, stream:   transfer_path="stream", 1 device;
  * Python, region:   the bytes already in a SharedRegion
                      (upload_from_region / download into a view of it: no
                      client-side copy), 1 device;
  * Python, auto:     transfer_path="auto" (one copy through a pooled staging
                      region), 1 device and P('data') over 8 devices;
  * C++, auto:        build/bin/remote_upload_bench --reps=2 against the same
                      daemon (TensorClient::Upload, kAuto; the second rep,
                      once its pool holds a region), 1 device, uploads only.
Downloads write into a preallocated, touched array (as the C++ benchmark
does); "to_numpy" also allocates the result. Then it runs
build/bin/tensor_transfer_bench once (the C++ client against its own
in-process daemon, same size) and prints its stream and region rows next to
the Python ones, with the ratios Python / C++.

    build/venv/bin/python python/bench/region_bench.py [--size_mib=256] [--reps=5]
        [--placementd=build/bin/placementd] [--cpp_upload=build/bin/remote_upload_bench]
        [--cpp_transfer=build/bin/tensor_transfer_bench]

MB/s are 1e6 bytes per second; "cpu" is this process's user + system time
per transfer (all threads), the client's own cost.
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

import placement
from placement import NamedSharding, PartitionSpec, _placing, regions
from placement.testing import LocalDaemon

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Series:
    def __init__(self, label: str) -> None:
        self.label = label
        self.seconds: List[float] = []
        self.cpu: List[float] = []

    def measure(self, work: Callable[[], object]) -> object:
        cpu = _cpu_seconds()
        start = time.perf_counter()
        result = work()
        self.seconds.append(time.perf_counter() - start)
        self.cpu.append(_cpu_seconds() - cpu)
        return result

    def best(self, size: int) -> float:
        return size / min(self.seconds) / 1e6

    def median(self, size: int) -> float:
        return size / statistics.median(self.seconds) / 1e6


def cpp_transfer_rows(binary: str, size_mib: int, reps: int) -> Dict[str, Tuple[float, float]]:
    """tensor_transfer_bench's rows: label -> (best, median) MB/s."""
    out = subprocess.run([binary, f"--size_mib={size_mib}", f"--reps={reps}",
                          "--reshard_replicated=false"],
                         check=True, capture_output=True, text=True).stdout
    rows: Dict[str, Tuple[float, float]] = {}
    for line in out.splitlines():
        fields = line[44:].split()
        if len(fields) >= 2:
            try:
                rows[line[:44].strip()] = (float(fields[0]), float(fields[1]))
            except ValueError:
                pass
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size_mib", type=int, default=256)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--placementd", default=os.path.join(ROOT, "build/bin/placementd"))
    parser.add_argument("--cpp_upload", default=os.path.join(ROOT, "build/bin/remote_upload_bench"))
    parser.add_argument("--cpp_transfer",
                        default=os.path.join(ROOT, "build/bin/tensor_transfer_bench"))
    args = parser.parse_args()
    size = args.size_mib << 20
    load_before = os.getloadavg()
    memory = 2 * size + (64 << 20)
    py: Dict[str, Series] = {}

    def series(label: str) -> Series:
        return py.setdefault(label, Series(label))

    cpp_auto = Series("C++ upload auto (staged region), 1 device, same daemon")
    cpp_auto_cpu: List[float] = []
    with LocalDaemon(args.placementd, [f"--cpu_device_memory={memory}"]) as daemon:
        client = placement.connect(daemon.address, timeout=600)
        stream = placement.Client(daemon.address,
                                  placement.TransportOptions(transfer_path="stream", timeout=600))
        assert regions.same_host(client), "the daemon should be on this host"
        data = np.zeros(size // 4, dtype=np.float32)
        data.view(np.uint8)[::4096] = 1  # touch every page once
        out = np.ones_like(data)  # touched, like the C++ benchmark's dst
        region_in = placement.SharedRegion(size, "bench-in")
        region_out = placement.SharedRegion(size, "bench-out")
        view_in = region_in.ndarray(np.float32, data.shape)
        view_in[:] = data
        view_out = region_out.ndarray(np.float32, data.shape)
        view_out[:] = 1
        one = _placing.device_rule(0)
        mesh = placement.Mesh(np.array(placement.devices()), ("data",))
        eight = _placing.sharding_rule(client, NamedSharding(mesh, PartitionSpec("data")))

        def round_trip(label: str, c: placement.Client, rule, *, path: str,
                       zero_copy: bool = False, fresh: bool = False) -> None:
            if zero_copy:
                info = series(f"upload   {label}").measure(
                    lambda: c.tensors.upload_from_region(region_in, 0, data.dtype, data.shape,
                                                         rule))
                series(f"download {label}").measure(
                    lambda: c.tensors.download(info.id, info=info, out=view_out))
                ok = np.array_equal(view_out, data)
            else:
                info = series(f"upload   {label}").measure(
                    lambda: c.tensors.upload(data, rule, path=path))
                series(f"download {label}").measure(
                    lambda: c.tensors.download(info.id, info=info, out=out, path=path))
                ok = np.array_equal(out, data)
                if fresh:
                    got = series(f"download {label}, to_numpy (new array)").measure(
                        lambda: c.tensors.download(info.id, info=info, path=path)[1])
                    ok = ok and np.array_equal(got, data)
                    del got
            c.delete_tensors([info.id])
            if not ok:
                raise SystemExit(f"{label}: the bytes came back different")

        for _ in range(args.reps):
            round_trip("Python stream, 1 device", stream, one, path="stream")
            round_trip("Python region (SharedRegion, no copy), 1 device", client, one,
                       path="region", zero_copy=True)
            round_trip("Python auto (staged region), 1 device", client, one, path="auto",
                       fresh=True)
            round_trip("Python auto (staged region), P('data') x8", client, eight, path="auto")
            lines = subprocess.run(
                [args.cpp_upload, f"--target={daemon.address}", f"--size_mib={args.size_mib}",
                 "--reps=2", "--device=0"], check=True, capture_output=True,
                text=True).stdout.splitlines()
            fields = lines[-1].split()  # the second rep: the C++ pool holds a region by then
            cpp_auto.seconds.append(float(fields[1]))
            cpp_auto_cpu.append(float(fields[5]))
        del view_in, view_out
        region_in.close()
        region_out.close()
        stream.close()
        client.close()

    cpp = cpp_transfer_rows(args.cpp_transfer, args.size_mib, args.reps)
    load_after = os.getloadavg()

    print(f"region bench: {args.size_mib} MiB f32, {args.reps} reps, 8 CPU devices, "
          f"tcp 127.0.0.1 + abstract region socket; load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after; {os.cpu_count()} cores")
    print(f"{'':<58} {'best':>7} {'median':>7} {'cpu s':>6}   (MB/s; cpu: client seconds per "
          f"transfer, median)")
    for s in py.values():
        print(f"{s.label:<58} {s.best(size):>7.0f} {s.median(size):>7.0f} "
              f"{statistics.median(s.cpu):>6.3f}")
    print(f"{cpp_auto.label:<58} {size / min(cpp_auto.seconds) / 1e6:>7.0f} "
          f"{size / statistics.median(cpp_auto.seconds) / 1e6:>7.0f} "
          f"{statistics.median(cpp_auto_cpu):>6.3f}")
    print(f"C++ rows from {os.path.basename(args.cpp_transfer)} (its own in-process daemon):")
    for label, (best, median) in cpp.items():
        if not label.startswith("reshard"):
            print(f"  {label:<56} {best:>7.0f} {median:>7.0f}")

    def med(label: str) -> float:
        return py[label].median(size)

    def ratio(a: float, b: Optional[float]) -> str:
        return f"{a / b:.2f}" if b else "-"

    def cpp_med(label: str) -> Optional[float]:
        row = cpp.get(label)
        return row[1] if row else None

    print("ratios of medians:")
    pairs = [
        ("upload,   Python region / Python stream",
         med("upload   Python region (SharedRegion, no copy), 1 device"),
         med("upload   Python stream, 1 device")),
        ("upload,   Python auto / Python stream",
         med("upload   Python auto (staged region), 1 device"),
         med("upload   Python stream, 1 device")),
        ("download, Python region / Python stream",
         med("download Python region (SharedRegion, no copy), 1 device"),
         med("download Python stream, 1 device")),
        ("download, Python auto / Python stream",
         med("download Python auto (staged region), 1 device"),
         med("download Python stream, 1 device")),
        ("upload,   Python auto / C++ auto, same daemon, 1 device",
         med("upload   Python auto (staged region), 1 device"),
         size / statistics.median(cpp_auto.seconds) / 1e6),
        ("upload,   Python stream / C++ stream, 1 device",
         med("upload   Python stream, 1 device"), cpp_med("upload   ours, 1 device")),
        ("upload,   Python region / C++ region, 1 device",
         med("upload   Python region (SharedRegion, no copy), 1 device"),
         cpp_med("upload   region, 1 device")),
        ("upload,   Python auto / C++ auto, P('data') x8",
         med("upload   Python auto (staged region), P('data') x8"),
         cpp_med("upload   auto (staged region), P('data') x8")),
        ("download, Python stream / C++ stream, 1 device",
         med("download Python stream, 1 device"), cpp_med("download ours, 1 device")),
        ("download, Python region / C++ region, 1 device",
         med("download Python region (SharedRegion, no copy), 1 device"),
         cpp_med("download region, 1 device")),
        ("download, Python auto / C++ auto, P('data') x8",
         med("download Python auto (staged region), P('data') x8"),
         cpp_med("download auto (staged region), P('data') x8")),
    ]
    for label, a, b in pairs:
        print(f"  {label:<58} {ratio(a, b)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
