"""placectl as a user at a terminal meets it, driven through a pty: the
progress bar of put / get (on a terminal only, not with --quiet),
$PLACEMENT_TARGET, tensor names where ids are taken, and `placectl top`
showing an upload and a download in flight with their rates, redrawing at
a new window size, and quitting on 'q'."""
import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import threading
import time

import numpy as np
import pytest

import placement

from placement.v1 import tensor_service_pb2 as pb
from placement.v1 import types_pb2

PLACECTL = os.environ.get("PLACECTL_BIN", "")
pytestmark = pytest.mark.skipif(not PLACECTL, reason="PLACECTL_BIN is not set (run through ctest)")


def set_size(fd, rows, columns):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def read_until(fd, done, timeout=60.0):
    """Bytes read from `fd` until done(text) holds (or the deadline, or EOF)."""
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not done(out.decode(errors="replace")):
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the other side closed
                break
            if not chunk:
                break
            out += chunk
    return out.decode(errors="replace")


def run_with_tty_stderr(*args, env=None):
    """placectl with stderr on a terminal (80 columns) and stdout on a pipe."""
    master, slave = pty.openpty()
    set_size(slave, 24, 120)
    proc = subprocess.Popen([PLACECTL, *args], stdout=subprocess.PIPE, stderr=slave,
                            stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    err = read_until(master, lambda _: proc.poll() is not None, timeout=120)
    err += read_until(master, lambda _: False, timeout=0.5)
    out = proc.stdout.read().decode()
    proc.stdout.close()
    os.close(master)
    return proc.wait(), out, err


@pytest.fixture
def npy(tmp_path):
    path = tmp_path / "big.npy"
    # 24 MiB: two placed copies fit a 64 MiB device with their blocks' overhead.
    np.save(path, np.arange(6 << 20, dtype=np.float32))
    return str(path)


def test_progress_bar_on_a_terminal_only(client, daemon, npy, tmp_path):
    code, out, err = run_with_tty_stderr("--target", daemon.address, "tensor", "put", npy,
                                         "--name=progress-big")
    assert code == 0, err
    assert "upload " + npy in err and "[" in err and "MiB" in err and "/s" in err
    assert "\r" in err and err.rstrip().endswith("\x1b[K")  # drawn in place, then erased
    assert "progress-big" in out and "\x1b" not in out  # the result, on a clean stdout
    code, out, err = run_with_tty_stderr("--target", daemon.address, "tensor", "get",
                                         "progress-big", str(tmp_path / "back.npy"))
    assert code == 0, err
    assert "download " in err and "MiB" in err
    np.testing.assert_array_equal(np.load(tmp_path / "back.npy"), np.load(npy))
    code, _, err = run_with_tty_stderr("--target", daemon.address, "--quiet", "tensor", "get",
                                       "progress-big", str(tmp_path / "again.npy"))
    assert code == 0 and err == "", err
    piped = subprocess.run([PLACECTL, "--target", daemon.address, "tensor", "get",
                            "progress-big", str(tmp_path / "piped.npy")],
                           capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    removed = subprocess.run([PLACECTL, "--target", daemon.address, "tensor", "rm",
                              "progress-big"], capture_output=True, text=True, timeout=60)
    assert removed.returncode == 0, removed.stderr


def test_placement_target_and_names(client, daemon, npy, tmp_path):
    env = {**os.environ, "PLACEMENT_TARGET": daemon.address}
    put = subprocess.run([PLACECTL, "tensor", "put", npy, "--name=img2"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert put.returncode == 0, put.stderr
    described = subprocess.run([PLACECTL, "--json", "tensor", "describe", "img2"], env=env,
                               capture_output=True, text=True, timeout=60)
    assert described.returncode == 0 and '"name": "img2"' in described.stdout.replace(
        '"name":"img2"', '"name": "img2"'), described.stderr
    # A derived result carries a derived name; two of them make the name ambiguous.
    for _ in range(2):
        placed = subprocess.run([PLACECTL, "tensor", "place", "img2", "--device=1"], env=env,
                                capture_output=True, text=True, timeout=60)
        assert placed.returncode == 0 and "img2:place" in placed.stdout, placed.stderr
    ambiguous = subprocess.run([PLACECTL, "tensor", "get", "img2:place",
                                str(tmp_path / "x.npy")], env=env, capture_output=True,
                               text=True, timeout=60)
    assert ambiguous.returncode == 1
    assert re.search(r"FAILED_PRECONDITION: tensor_id 'img2:place' is the name of 2 tensors "
                     r"\(t-[0-9a-f]+, t-[0-9a-f]+\)", ambiguous.stderr), ambiguous.stderr
    removed = subprocess.run([PLACECTL, "tensor", "rm", "--prefix=img2"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert removed.returncode == 0 and "deleted 3 tensors" in removed.stdout, removed.stderr
    nobody = subprocess.run([PLACECTL, "devices"],
                            env={**os.environ, "PLACEMENT_TARGET": "127.0.0.1:1"},
                            capture_output=True, text=True, timeout=60)
    assert nobody.returncode == 1 and "cannot reach placementd at 127.0.0.1:1" in nobody.stderr


def test_top_shows_transfers_in_flight_resizes_and_quits(client, daemon):
    # An upload that stays open: its header and 4 MiB of 16, then nothing until released.
    release = threading.Event()

    def requests():
        header = pb.UploadRequest()
        header.header.dtype = types_pb2.DTYPE_U8
        header.header.shape.append(16 << 20)
        header.header.name = "in-flight"
        header.header.rule.placement.device_id = 2
        yield header
        for _ in range(4):
            yield pb.UploadRequest(chunk=bytes(1 << 20))
        release.wait(120)

    def upload():
        try:
            client.tensor_stub.Upload(requests(), timeout=120)
        except Exception:  # ends short: INVALID_ARGUMENT, nothing kept
            pass

    # And a download that stays open: its header read, the rest held back by
    # flow control (48 MiB: far more than HTTP/2's window and the sockets hold).
    out = client.tensors.upload(np.zeros(48 << 20, np.uint8), placement._placing.device_rule(3),
                                name="going-out")
    download = client.tensor_stub.Download(pb.DownloadRequest(tensor_id="going-out"), timeout=120)
    uploader = threading.Thread(target=upload)
    uploader.start()
    try:
        assert next(download).HasField("header")
    except BaseException:
        release.set()
        download.cancel()
        uploader.join(timeout=60)
        client.delete_tensors([out.id])
        raise
    master, slave = pty.openpty()
    set_size(slave, 40, 160)
    proc = subprocess.Popen([PLACECTL, "--target", daemon.address, "top", "--interval=300ms"],
                            stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    try:
        # A frame drawn before the daemon has read the 4 MiB shows 0 B: wait
        # for one drawn after (top redraws every 300 ms).
        wide = read_until(master, lambda t: "upload" in t and "in-flight u8[16777216]" in t
                          and "MB/s" in t and "4.0 MiB / 16.0 MiB (25%)" in t
                          and "download" in t and "going-out u8[50331648]" in t)
        assert "4.0 MiB / 16.0 MiB (25%)" in wide, wide[-3000:]
        assert "/ 48.0 MiB" in wide, wide[-3000:]  # the download's total
        # A narrower window: the next frames fit 60 columns and 20 rows.
        set_size(master, 20, 60)
        proc.send_signal(signal.SIGWINCH)
        clear = "\x1b[H\x1b[2J"
        narrow = read_until(master, lambda t: t.count(clear) >= 3)
        frame = narrow.split(clear)[-2]
        lines = frame.splitlines()
        assert lines and max(len(line) for line in lines) <= 60, lines
        assert len(lines) <= 20
        os.write(master, b"q")
        assert proc.wait(timeout=30) == 0
    finally:
        release.set()
        download.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        uploader.join(timeout=60)
        client.delete_tensors([out.id])
