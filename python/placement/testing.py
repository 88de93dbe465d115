"""placementd daemons started for tests, benchmarks and examples.

    with LocalDaemon() as daemon:              # $PLACEMENTD_BIN, else placementd on PATH
        client = placement.connect(daemon.address)
    with LocalCluster(2, 4) as cluster:        # 2 daemons x 4 devices, one cluster
        clients = [placement.Client(a) for a in cluster.addresses]

Listens on 127.0.0.1 port 0 (or a unix socket) and reads the address back
from --ready_file (and, with --metrics_listen, the metrics URL); stop()
sends SIGTERM and waits. The daemon dies with the process that started it
only through stop() / the context manager.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any, List, Optional, Sequence


def find_placementd() -> str:
    found = os.environ.get("PLACEMENTD_BIN") or shutil.which("placementd")
    if not found:
        raise FileNotFoundError("placementd not found: set PLACEMENTD_BIN or put it on PATH")
    return found


class LocalDaemon:
    """A CPU-backend placementd on 127.0.0.1:0 (`listen` overrides).
    With wait=False the constructor returns once the process started;
    wait_ready() then waits for its ready file (LocalCluster starts every
    daemon before waiting: a cluster serves only once all have joined)."""

    def __init__(self, binary: Optional[str] = None, args: Sequence[str] = (),
                 listen: str = "127.0.0.1:0", devices: int = 8,
                 start_timeout: float = 30.0, *, wait: bool = True) -> None:
        self.binary = binary or find_placementd()
        self._dir = tempfile.TemporaryDirectory(prefix="placementd-")
        self._ready = os.path.join(self._dir.name, "ready")
        self.log_path = os.path.join(self._dir.name, "log")
        self.start_timeout = start_timeout
        command: List[str] = [self.binary, f"--listen={listen}", "--backend=cpu",
                              f"--cpu_devices={devices}", f"--ready_file={self._ready}", *args]
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        self.address = ""
        #: With --metrics_listen: the Prometheus URL (a line of the ready file).
        self.metrics_url: Optional[str] = None
        #: In a cluster: the daemon's advertised peer address.
        self.peer_address: Optional[str] = None
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: Optional[float] = None) -> None:
        """Waits for the ready file (RuntimeError with the log when the
        daemon exits or `timeout`, default start_timeout, passes)."""
        deadline = time.monotonic() + (self.start_timeout if timeout is None else timeout)
        ready = self._ready
        while not os.path.exists(ready) or not open(ready).read().strip():
            code = self.process.poll()
            if code is not None or time.monotonic() > deadline:
                why = f"exited with {code}" if code is not None else "is not ready in time"
                log = self.log()
                self.stop()
                raise RuntimeError(f"placementd {why}: {log}")
            time.sleep(0.02)
        with open(ready) as f:
            lines = f.read().split()
        self.address = lines[0]
        self.metrics_url = next(
            (line[len("metrics="):] for line in lines[1:] if line.startswith("metrics=")), None)
        self.peer_address = next(
            (line[len("peer="):] for line in lines[1:] if line.startswith("peer=")), None)

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self) -> None:
        if self._log.closed:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        self._dir.cleanup()

    def __enter__(self) -> "LocalDaemon":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (bound and released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalCluster:
    """`num_processes` CPU-backend daemons forming one cluster on loopback,
    `devices_per_process` devices each (global ids: process p has
    p * devices_per_process ...). Process 0 is the coordinator on a free
    port; every daemon listens on 127.0.0.1:0. Short heartbeats
    (`heartbeat_interval` x `heartbeat_misses`) keep failures quick to
    detect. The constructor returns once the cluster formed.

        with LocalCluster(2, 4) as cluster:
            clients = [placement.Client(a) for a in cluster.addresses]
    """

    def __init__(self, num_processes: int = 2, devices_per_process: int = 4, *,
                 binary: Optional[str] = None, args: Sequence[str] = (),
                 heartbeat_interval: str = "250ms", heartbeat_misses: int = 8,
                 start_timeout: float = 60.0) -> None:
        self.coordinator = f"127.0.0.1:{free_port()}"
        self.daemons: List[LocalDaemon] = []
        try:
            for i in range(num_processes):
                self.daemons.append(LocalDaemon(
                    binary, devices=devices_per_process, start_timeout=start_timeout, wait=False,
                    args=[f"--num_processes={num_processes}", f"--process_index={i}",
                          f"--coordinator={self.coordinator}",
                          f"--heartbeat_interval={heartbeat_interval}",
                          f"--heartbeat_misses={heartbeat_misses}",
                          f"--cluster_init_timeout={int(start_timeout)}s", *args]))
            for i, d in enumerate(self.daemons):
                try:
                    d.wait_ready()
                except RuntimeError as e:
                    raise RuntimeError(f"daemon {i}: {e}") from None
        except BaseException:
            self.stop()
            raise

    @property
    def addresses(self) -> List[str]:
        return [d.address for d in self.daemons]

    def __len__(self) -> int:
        return len(self.daemons)

    def __getitem__(self, i: int) -> LocalDaemon:
        return self.daemons[i]

    def stop(self) -> None:
        """Stops every daemon, the others before the coordinator."""
        for d in reversed(self.daemons):
            d.stop()

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
