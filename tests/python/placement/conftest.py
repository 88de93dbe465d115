"""Fixtures of the Python client suite: one CPU-backend placementd per
pytest session (port 0, --ready_file), the default client connected to it,
and a check after every test that the daemon's device memory is back to zero
(every tensor a test made was freed: deleted, collected, or released by its
stream)."""
import gc
import os
import time

# JAX (when installed) sees 8 CPU devices, like the daemon; set before any import of jax.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest  # noqa: E402

import placement  # noqa: E402
from placement.testing import LocalDaemon  # noqa: E402

DEVICE_MEMORY = 64 << 20


def wait_for_memory(client, expected=None, timeout=10.0):
    """Polls ListDevices until every device holds `expected` bytes (dict, or
    0 everywhere); returns the last figures."""
    deadline = time.monotonic() + timeout
    while True:
        now = client.memory_in_use()
        want = expected if expected is not None else {d: 0 for d in now}
        if now == want or time.monotonic() > deadline:
            return now
        time.sleep(0.01)


@pytest.fixture(scope="session")
def daemon():
    with LocalDaemon(args=[f"--cpu_device_memory={DEVICE_MEMORY}"]) as d:
        yield d
        check_alive(d)


def check_alive(d):
    """A daemon that died under the suite says why (its log) instead of
    leaving every later test UNAVAILABLE."""
    code = d.process.poll()
    assert code is None, f"placementd exited with {code} during the suite:\n{d.log()}"


@pytest.fixture(scope="session")
def client(daemon):
    c = placement.connect(daemon.address)
    yield c
    c.close()


@pytest.fixture(autouse=True)
def no_leaks(client):
    yield
    gc.collect()
    client.flush()
    left = wait_for_memory(client)
    assert all(v == 0 for v in left.values()), f"device memory not freed: {left}"
