"""A client opens a session by default (issue 23 item 6): what a killed
client created is freed once the session's lease runs out, what a closed
one created at once; keep() takes a tensor out of it; session="none" makes
results durable; connect() to a closed port fails at once."""
import os
import signal
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import placement
from placement import TransportOptions, errors

from conftest import wait_for_memory


def test_client_joins_its_own_session(client):
    assert client.session_id
    x = placement.device_put(np.ones(1024, np.float32), 0)
    sessions = client.status().num_session_tensors
    assert sessions >= 1
    x.delete()


def test_killed_client_is_freed_when_its_lease_runs_out(client):
    # A child process uploads 4 MiB with a 1 s lease and is SIGKILLed: nothing
    # deletes the tensor but the daemon, once the lease has run out.
    script = textwrap.dedent(f"""
        import sys, time, numpy as np, placement
        c = placement.connect({client.target!r}, session_ttl=1.0)
        x = placement.device_put(np.ones(1 << 20, np.float32), 3)
        print(x.id, flush=True)
        time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        tensor_id = child.stdout.readline().strip()
        assert tensor_id.startswith("t-"), tensor_id
        assert client.memory_in_use()[3] == 4 << 20
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
        child.stdout.close()
    assert wait_for_memory(client, timeout=15)[3] == 0
    with pytest.raises(errors.NotFoundError):
        client.tensors.describe(tensor_id)


def test_closed_client_frees_at_once_and_keep_survives(client):
    other = placement.Client(client.target)
    gone = placement.device_put(np.ones(256, np.float32), 1, client=other)
    kept = placement.device_put(np.ones(256, np.float32), 2, client=other).keep()
    gone._owned = False  # not deleted by close() itself: the session frees it
    other.close()
    assert client.memory_in_use()[1] == 0
    info = client.tensors.describe(kept.id)
    assert info.id == kept.id
    client.delete_tensors([kept.id])


def test_session_none_makes_results_durable(client):
    other = placement.Client(client.target, TransportOptions(session="none"))
    assert other.session_id is None
    x = placement.device_put(np.ones(64, np.float32), 4, client=other)
    x._owned = False
    other.close()
    assert client.tensors.describe(x.id).id == x.id
    client.delete_tensors([x.id])
    with pytest.raises(errors.InvalidArgumentError, match="session is 'sometimes'"):
        TransportOptions(session="sometimes")


def test_connect_to_a_closed_port_fails_at_once():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the with block ends
    # A timeout this test would not outlive: only the refusal can end the wait.
    with pytest.raises(errors.UnavailableError) as e:
        placement.Client(f"127.0.0.1:{port}", TransportOptions(connect_timeout=3600))
    assert str(e.value).startswith(f"cannot reach placementd at 127.0.0.1:{port}: the "
                                   f"connection failed")
