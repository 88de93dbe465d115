"""A placementd started for tests, benchmarks and examples.

    with LocalDaemon() as daemon:              # $PLACEMENTD_BIN, else placementd on PATH
        client = placement.connect(daemon.address)

Listens on 127.0.0.1 port 0 (or a unix socket) and reads the address back
from --ready_file (and, with --metrics_listen, the metrics URL); stop()
sends SIGTERM and waits. The daemon dies with the process that started it
only through stop() / the context manager.
"""
from __future__ import annotations

import os
import shutil
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
    """A CPU-backend placementd on 127.0.0.1:0 (`listen` overrides)."""

    def __init__(self, binary: Optional[str] = None, args: Sequence[str] = (),
                 listen: str = "127.0.0.1:0", devices: int = 8,
                 start_timeout: float = 30.0) -> None:
        self.binary = binary or find_placementd()
        self._dir = tempfile.TemporaryDirectory(prefix="placementd-")
        ready = os.path.join(self._dir.name, "ready")
        self.log_path = os.path.join(self._dir.name, "log")
        command: List[str] = [self.binary, f"--listen={listen}", "--backend=cpu",
                              f"--cpu_devices={devices}", f"--ready_file={ready}", *args]
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + start_timeout
        while not os.path.exists(ready) or not open(ready).read().strip():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"placementd did not start: {self.log()}")
            time.sleep(0.02)
        with open(ready) as f:
            lines = f.read().split()
        self.address = lines[0]
        #: With --metrics_listen: the Prometheus URL (line 2 of the ready file).
        self.metrics_url: Optional[str] = next(
            (line[len("metrics="):] for line in lines[1:] if line.startswith("metrics=")), None)

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self) -> None:
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
