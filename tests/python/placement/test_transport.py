"""Transport: connect errors, deadlines, retries of idempotent calls only,
errors carrying the gRPC code, killed clients and daemons."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pytest

import placement
from placement import TransportOptions, _placing, errors
from placement.testing import LocalDaemon
from placement.v1 import device_service_pb2, mesh_service_pb2

from conftest import wait_for_memory


def test_unreachable_daemon():
    with tempfile.TemporaryDirectory() as tmp:
        target = f"unix:{tmp}/nobody.sock"
        with pytest.raises(errors.UnavailableError) as e:
            placement.Client(target, TransportOptions(connect_timeout=3600))
        assert str(e.value) == (f"cannot reach placementd at {target}: the connection failed "
                                f"(nothing listens there, or it refused or is unreachable)")
        assert isinstance(e.value, ConnectionError)


class _Listener:
    """A TCP listener on 127.0.0.1:0 that closes the first `drop` connections
    it accepts and forwards later ones to `upstream` (None: closes them all),
    byte for byte."""

    def __init__(self, upstream, drop):
        self._upstream, self._drop, self.accepted = upstream, drop, 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.target = f"127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            self.accepted += 1
            if self._upstream is None or self.accepted <= self._drop:
                conn.close()
                continue
            host, port = self._upstream.rsplit(":", 1)
            up = socket.create_connection((host, int(port)))
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._sock.shutdown(socket.SHUT_RDWR)  # wakes accept()
        self._sock.close()


def _pump(a, b):
    try:
        while True:
            data = a.recv(1 << 16)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):  # the other direction's recv() returns too
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def test_a_first_attempt_that_fails_where_something_listens_is_retried(client):
    # gRPC reports the dropped first connection as a failure; something
    # listens there, so its reconnection gets a grace and the client connects.
    with _Listener(client.target, drop=1) as listener:
        c = placement.Client(listener.target, TransportOptions(connect_timeout=3600,
                                                               session="none"))
        assert len(c.devices()) == 8
        c.close()
    assert listener.accepted >= 3  # the dropped one, the probe, gRPC's second


def test_a_listener_that_never_speaks_grpc_fails_after_the_grace():
    # Not the 3600 s connect timeout: the failure stands once gRPC's
    # reconnections failed for LISTENER_GRACE.
    with _Listener(None, drop=0) as listener:
        with pytest.raises(errors.UnavailableError) as e:
            placement.Client(listener.target, TransportOptions(connect_timeout=3600))
    assert str(e.value) == (f"cannot reach placementd at {listener.target}: the connection "
                            f"failed (nothing listens there, or it refused or is unreachable)")


def test_option_checks():
    with pytest.raises(errors.InvalidArgumentError) as e:
        TransportOptions(chunk_bytes=0)
    assert str(e.value) == "chunk_bytes is 0; expected 1 to 4194304"
    with pytest.raises(errors.InvalidArgumentError):
        TransportOptions(chunk_bytes=(4 << 20) + 1)


def test_stream_deadline_frees_the_half_done_upload(client):
    # The stream path: thousands of small chunks outlast the deadline (a
    # same-host region would move the 16 MiB in one message).
    streaming = placement.Client(client.target, TransportOptions(stream_timeout=0.005,
                                                                 chunk_bytes=4096,
                                                                 transfer_path="stream"))
    with pytest.raises(errors.DeadlineExceededError):
        placement.device_put(np.ones(16 << 20, np.uint8), 0, client=streaming)
    streaming.close()
    assert wait_for_memory(client)[0] == 0


def _state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def test_unary_deadline_against_a_stopped_daemon(daemon):
    own = LocalDaemon(daemon.binary)
    try:
        c = placement.Client(own.address, TransportOptions(timeout=0.2))
        assert len(c.list_devices()) == 8
        own.process.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while _state(own.process.pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.005)  # every thread stopped
        start = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError) as e:
            c.list_devices()
        assert e.value.code.name == "DEADLINE_EXCEEDED" and isinstance(e.value, TimeoutError)
        assert time.monotonic() - start < 5  # not retried (only UNAVAILABLE is)
        own.process.send_signal(signal.SIGCONT)
        c.close()
    finally:
        own.process.send_signal(signal.SIGCONT)
        own.stop()


@pytest.mark.xfail(reason="daemon bug (reported): a Place whose caller's deadline passed still "
                          "commits its result, which nobody can name or free")
def test_place_past_its_deadline_keeps_nothing(client):
    hurried = placement.Client(client.target, TransportOptions(timeout=0.002))
    try:
        # Inside the try: under load the upload itself can miss the 2 ms and
        # fail; the cleanup below (and closing `hurried`'s session) must
        # still run, or its tensor stays for the next tests.
        source = placement.device_put(np.ones(16 << 20, np.uint8), 0, client=hurried)  # a stream
        with pytest.raises(errors.DeadlineExceededError):  # unary Place: 8 x 16 MiB to copy
            _placing.place_tree(hurried, source, _placing.replicate_rule(None))
        source.delete()
        left = wait_for_memory(client, timeout=3)
        assert all(v == 0 for v in left.values()), left
    finally:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and client.memory_in_use()[1] == 0:
            time.sleep(0.01)  # the late result shows up once the copy finished
        client.delete_tensors([t.id for t in client.tensors.list()], missing_ok=True)
        hurried.close()


def test_idempotent_calls_are_retried_until_the_daemon_is_up(daemon):
    with tempfile.TemporaryDirectory() as tmp:
        target = f"unix:{tmp}/late.sock"
        c = placement.Client(target, TransportOptions(connect_timeout=0, retries=8,
                                                      retry_backoff=0.05))
        attempts = []

        def list_devices(request, timeout):
            attempts.append(time.monotonic())
            return c.device_stub.ListDevices(request, timeout=timeout)

        result = {}
        caller = threading.Thread(target=lambda: result.setdefault("r", c.unary(
            list_devices, device_service_pb2.ListDevicesRequest(), idempotent=True)))
        caller.start()
        deadline = time.monotonic() + 10
        while len(attempts) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(attempts) >= 2  # failed at least once before the daemon existed
        with LocalDaemon(daemon.binary, listen=target):
            caller.join(timeout=30)
            assert len(result["r"].devices) == 8
        c.close()


def test_other_calls_are_not_retried():
    with tempfile.TemporaryDirectory() as tmp:
        c = placement.Client(f"unix:{tmp}/none.sock", TransportOptions(connect_timeout=0))
        attempts = []

        def create_mesh(request, timeout):
            attempts.append(1)
            return c.mesh_stub.CreateMesh(request, timeout=timeout)

        request = mesh_service_pb2.CreateMeshRequest()
        request.data_parallel.SetInParent()
        with pytest.raises(errors.UnavailableError):
            c.unary(create_mesh, request, idempotent=False)
        assert attempts == [1]
        c.close()


def test_killed_client_mid_upload_frees_everything(client):
    # The kill lands mid-upload (the daemon drops the half-written tensor
    # when the stream breaks) or, now and then under load, between an upload
    # and its delete: that tensor belongs to the child's session, and goes
    # when the session's 5 s lease runs out unrenewed.
    code = ("import numpy as np, placement, sys\n"
            "c = placement.connect(sys.argv[1], chunk_bytes=16384, transfer_path='stream',\n"
            "                      session_ttl=5)\n"
            "x = np.ones(48 << 20, np.uint8)\n"
            "while True:\n"
            "    placement.device_put(x, 3).delete()\n")
    child = subprocess.Popen([sys.executable, "-c", code, client.target])
    try:
        deadline = time.monotonic() + 60
        while client.memory_in_use()[3] == 0:  # the upload's shards are allocated
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert wait_for_memory(client, timeout=30)[3] == 0


def test_killed_daemon_reports_unavailable(daemon):
    own = LocalDaemon(daemon.binary)
    c = placement.Client(own.address, TransportOptions(retries=1, retry_backoff=0.01))
    r = placement.device_put(np.ones(4), 0, client=c)
    own.process.kill()
    own.stop()
    with pytest.raises(errors.UnavailableError) as e:
        np.asarray(r)
    assert e.value.code.name == "UNAVAILABLE"
    c.close()  # deleting what it owned fails quietly: the daemon is gone
