"""The Python client over TLS with bearer tokens and sessions: certificates
made with `openssl` here, a daemon with --tls_cert/--auth_file, tensors
landing in the token's tenant, wrong tokens refused UNAUTHENTICATED, and a
session's tensors freed when the session closes."""
import hashlib
import os
import subprocess
import tempfile

import numpy as np
import pytest

import placement
from placement import TransportOptions, errors
from placement.testing import LocalDaemon
from placement.v1 import session_service_pb2, session_service_pb2_grpc

TOKEN = "python-token-7f3c"


def _openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def secured():
    with tempfile.TemporaryDirectory() as d:
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        _openssl("req", "-x509", *ec, "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem", "-days",
                 "2", "-subj", "/CN=test-ca", "-addext", "basicConstraints=critical,CA:TRUE")
        _openssl("req", "-new", *ec, "-keyout", f"{d}/server.key", "-out", f"{d}/server.csr",
                 "-subj", "/CN=placementd")
        with open(f"{d}/server.ext", "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        _openssl("x509", "-req", "-in", f"{d}/server.csr", "-CA", f"{d}/ca.pem", "-CAkey",
                 f"{d}/ca.key", "-CAcreateserial", "-days", "2", "-extfile", f"{d}/server.ext",
                 "-out", f"{d}/server.pem")
        digest = hashlib.sha256(TOKEN.encode()).hexdigest()
        with open(f"{d}/creds", "w") as f:
            f.write(f"token sha256:{digest} team-py user\n")
        daemon = LocalDaemon(args=[f"--tls_cert={d}/server.pem", f"--tls_key={d}/server.key",
                                   f"--auth_file={d}/creds"], devices=2)
        try:
            yield daemon, f"{d}/ca.pem"
        finally:
            daemon.stop()


def test_tls_and_token_put_tensors_in_the_tenant(secured):
    daemon, ca = secured
    client = placement.Client(daemon.address,
                              TransportOptions(tls=True, tls_ca_file=ca, token=TOKEN))
    x = placement.device_put(np.arange(8, dtype=np.float32), client=client)
    assert client.tensors.describe(x.id).tenant == "team-py"
    np.testing.assert_array_equal(np.asarray(x), np.arange(8, dtype=np.float32))
    client.close()


def test_wrong_or_missing_token_is_unauthenticated(secured):
    daemon, ca = secured
    for token in ["not-it", None]:
        # Refused at connect: the client's session is the first call.
        with pytest.raises(errors.UnauthenticatedError):
            placement.Client(daemon.address, TransportOptions(tls=True, tls_ca_file=ca,
                                                              token=token))
        client = placement.Client(daemon.address, TransportOptions(
            tls=True, tls_ca_file=ca, token=token, session="none"))
        with pytest.raises(errors.UnauthenticatedError):
            client.list_devices()
        client.close()


def test_session_tensors_go_with_the_session(secured):
    daemon, ca = secured
    options = TransportOptions(tls=True, tls_ca_file=ca, token=TOKEN)
    admin = placement.Client(daemon.address, options)
    sessions = session_service_pb2_grpc.SessionServiceStub(admin.transport.channel)
    opened = admin.unary(sessions.OpenSession, session_service_pb2.OpenSessionRequest(),
                         idempotent=False).session
    scoped = placement.Client(daemon.address, TransportOptions(
        tls=True, tls_ca_file=ca, token=TOKEN, session_id=opened.id))
    x = placement.device_put(np.ones(4, np.float32), client=scoped)
    assert admin.unary(sessions.CloseSession,
                       session_service_pb2.CloseSessionRequest(session_id=opened.id),
                       idempotent=False).deleted_tensors == 1
    with pytest.raises(errors.NotFoundError):
        admin.tensors.describe(x.id)
    scoped.close()
    admin.close()


def test_cert_and_key_go_together():
    with pytest.raises(errors.InvalidArgumentError):
        TransportOptions(tls=True, tls_cert_file="/x.pem")
