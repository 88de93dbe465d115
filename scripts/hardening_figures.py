"""Before/after figures of issue 23 (hardening), measured against a placementd
binary from the outside: the daemon's own resident memory (VmRSS less
RssShmem, from /proc/<pid>/status), its descriptors, and the status codes a
careless or hostile client gets. Run it with the build venv's Python (grpcio
and grpcio-tools) against the binary of any commit:

    build/venv/bin/python scripts/hardening_figures.py --placementd build/bin/placementd

Each line names the case and the figure. The cases are the issue's: a flood
of one-byte tensors on 2 x 8 MiB devices and of eight-byte tensors over
8 x 8 MiB devices (then everything deleted); a 4 KiB - 24 MiB churn and 12 s
idle; 50 idle connections on the region socket; 300 fds from one process; a
TLS rotation through a garbage certificate and a mismatched pair (made with
openssl); 15 looping Python clients SIGKILLed, with and without their own
session; a shm region shrunk under transfers; and the smaller ones (an oversized
hardware_name, a Prefetch buffer_size of INT32_MAX, sessions opened in a
loop, a mesh made in a session, a region registered outside a session by a
killed client, an unparseable message after a complete upload). Takes about
a minute.
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import grpc

MIB = 1 << 20


def load_stubs():
    """Compiles proto/placement/v1 with grpcio-tools into a temp dir."""
    from grpc_tools import protoc
    import grpc_tools
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "proto")
    out = tempfile.mkdtemp(prefix="hardening-stubs-")
    protos = [os.path.join(root, "placement", "v1", p)
              for p in sorted(os.listdir(os.path.join(root, "placement", "v1")))]
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    if protoc.main(["protoc", f"-I{root}", f"-I{include}", f"--python_out={out}",
                    f"--grpc_python_out={out}", "--experimental_allow_proto3_optional",
                    *protos]) != 0:
        sys.exit("protoc failed")
    sys.path.insert(0, out)
    os.environ["PYTHONPATH"] = out + os.pathsep + os.environ.get("PYTHONPATH", "")


def status_bytes(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0


class Daemon:
    def __init__(self, binary, *flags):
        self.dir = tempfile.mkdtemp(prefix="hardening-")
        ready = os.path.join(self.dir, "ready")
        self.stderr = open(os.path.join(self.dir, "stderr"), "w+")
        self.proc = subprocess.Popen(
            [binary, "--listen=127.0.0.1:0", f"--ready_file={ready}", "--backend=cpu", *flags],
            stderr=self.stderr, stdout=subprocess.DEVNULL)
        for _ in range(600):
            if os.path.exists(ready) and os.path.getsize(ready) > 0:
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.address = open(ready).readline().strip() if os.path.exists(ready) else ""
        self.channel = grpc.insecure_channel(self.address)

    def rss(self):
        return status_bytes(self.proc.pid, "VmRSS:") - status_bytes(self.proc.pid, "RssShmem:")

    def fds(self):
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def alive(self):
        return self.proc.poll() is None

    def log(self):
        self.stderr.seek(0)
        return self.stderr.read()

    def stop(self):
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.returncode


def pb():
    from placement.v1 import (daemon_service_pb2, daemon_service_pb2_grpc, device_service_pb2,
                              device_service_pb2_grpc, mesh_service_pb2, mesh_service_pb2_grpc,
                              prefetch_service_pb2, prefetch_service_pb2_grpc,
                              region_service_pb2, region_service_pb2_grpc,
                              session_service_pb2, session_service_pb2_grpc,
                              tensor_service_pb2, tensor_service_pb2_grpc, types_pb2)
    return locals()


def code(error):
    return error.code().name if isinstance(error, grpc.RpcError) else "OK"


def upload_batches(d, m, nbytes, rule, at_most):
    """UploadBatch of 500 arrays of `nbytes`, then single ones, until refused."""
    stub = m["tensor_service_pb2_grpc"].TensorServiceStub(d.channel)
    ts = m["tensor_service_pb2"]
    ids, last = [], "OK"
    batch = 500
    while len(ids) < at_most and batch >= 1:
        def requests(n=batch):
            header = ts.BatchHeader(rule=rule)
            for i in range(n):
                header.arrays.add(key=f"k{i}", dtype=m["types_pb2"].DTYPE_U8, shape=[nbytes])
            yield ts.UploadBatchRequest(header=header)
            for i in range(n):
                yield ts.UploadBatchRequest(chunk=ts.BatchChunk(array_index=i, data=b"\x07" * nbytes))
        try:
            response = stub.UploadBatch(requests(), timeout=60)
            ids += [t.tensor.id for t in response.tensors]
        except grpc.RpcError as e:
            last = e.code().name
            batch = batch // 10 if batch > 1 else 0
    return ids, last


def delete_all(d, m, ids):
    stub = m["tensor_service_pb2_grpc"].TensorServiceStub(d.channel)
    for i in range(0, len(ids), 1000):
        stub.Delete(m["tensor_service_pb2"].DeleteTensorsRequest(tensor_ids=ids[i:i + 1000]))


def flood(binary, m, devices, nbytes, at_most, replicated):
    d = Daemon(binary, f"--cpu_devices={devices}", f"--cpu_device_memory={8 * MIB}")
    ts = m["tensor_service_pb2"]
    if replicated:
        m["mesh_service_pb2_grpc"].MeshServiceStub(d.channel).CreateMesh(
            m["mesh_service_pb2"].CreateMeshRequest(
                mesh_id="all", axes=m["mesh_service_pb2"].AxesSpec(
                    axes=[m["types_pb2"].MeshAxis(name="data", size=devices)])))
    base = d.rss()
    ids = []
    last = "OK"
    for dev in range(devices if not replicated else 1):
        if replicated:
            rule = ts.PlacementRule(placement=m["types_pb2"].Placement(replicated_mesh_id="all"))
        else:
            rule = ts.PlacementRule(placement=m["types_pb2"].Placement(device_id=dev))
        got, last = upload_batches(d, m, nbytes, rule, (at_most - len(ids)) // (1 if replicated else devices - dev))
        ids += got
    peak = d.rss() - base
    delete_all(d, m, ids)
    time.sleep(12)
    after = d.rss() - base
    print(f"  {len(ids)} tensors of {nbytes} B ({'replicated over' if replicated else 'on'} "
          f"{devices} x 8 MiB devices), refusal {last}; RSS +{peak / MIB:.1f} MiB; "
          f"all deleted + 12 s: RSS +{after / MIB:.1f} MiB")
    d.stop()


def churn(binary, m):
    d = Daemon(binary, "--cpu_devices=2", f"--cpu_device_memory={64 * MIB}")
    ts = m["tensor_service_pb2"]
    stub = m["tensor_service_pb2_grpc"].TensorServiceStub(d.channel)
    base = d.rss()
    state = 0x9e3779b97f4a7c15
    live = [[], []]
    data = b"\x5a" * (24 * MIB)
    for i in range(60):
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        size = 4096 + (state >> 33) % (24 * MIB - 4096)
        dev = i % 2
        if len(live[dev]) == 2:
            stub.Delete(ts.DeleteTensorsRequest(tensor_ids=[live[dev].pop(0)]))

        def requests(size=size, dev=dev):
            yield ts.UploadRequest(header=ts.UploadHeader(
                dtype=m["types_pb2"].DTYPE_U8, shape=[size],
                rule=ts.PlacementRule(placement=m["types_pb2"].Placement(device_id=dev))))
            for off in range(0, size, MIB):
                yield ts.UploadRequest(chunk=data[off:min(size, off + MIB)])
        live[dev].append(stub.Upload(requests(), timeout=60).tensor.id)
    for ids in live:
        stub.Delete(ts.DeleteTensorsRequest(tensor_ids=ids))
    right_after = d.rss() - base
    time.sleep(12)
    print(f"  4 KiB - 24 MiB churn on 2 x 64 MiB: all deleted RSS +{right_after / MIB:.1f} MiB; "
          f"after 12 s idle +{(d.rss() - base) / MIB:.1f} MiB")
    d.stop()


def sealed_memfd(size):
    import fcntl
    fd = os.memfd_create("figures", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd


def pass_fd(address, fd, timeout=60):
    path = "\0" + address[1:] if address.startswith("@") else address
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        socket.send_fds(s, [b"R"], [fd])
        return s.recv(512).decode().split("\n")[0]


def region_socket(binary, m):
    d = Daemon(binary, "--cpu_devices=1")
    status = m["daemon_service_pb2_grpc"].DaemonServiceStub(d.channel).GetStatus(
        m["daemon_service_pb2"].GetStatusRequest())
    address = status.region_socket
    path = "\0" + address[1:] if address.startswith("@") else address
    idle = []
    for _ in range(50):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        idle.append(s)
    fd = sealed_memfd(MIB)
    start = time.time()
    try:
        token = pass_fd(address, fd)
    except OSError as e:
        token = f"error {e}"
    print(f"  50 idle connections: a client's fd passed in {time.time() - start:.2f} s "
          f"({'token' if len(token) == 32 else token})")
    for s in idle:
        s.close()
    # A token deposited first, then 300 fds from another process.
    mine = pass_fd(address, fd)
    child = subprocess.run([sys.executable, "-c", f"""
import os, socket, fcntl
ok = 0
for i in range(300):
    fd = os.memfd_create('flood', os.MFD_ALLOW_SEALING); os.ftruncate(fd, 4096)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10); s.connect({path!r}); socket.send_fds(s, [b'R'], [fd])
        ok += len(s.recv(512).split(b'\\n')[0]) == 32
    os.close(fd)
print(ok)
"""], capture_output=True, text=True)
    regions = m["region_service_pb2_grpc"].RegionServiceStub(d.channel)
    try:
        regions.RegisterRegion(m["region_service_pb2"].RegisterRegionRequest(fd_token=mine))
        outcome = "OK"
    except grpc.RpcError as e:
        outcome = e.code().name
    print(f"  300 fds from another process ({child.stdout.strip()} accepted): the first "
          f"client's RegisterRegion {outcome}; daemon fds {d.fds()}")
    os.close(fd)
    d.stop()


def tls_rotation(binary, m):
    """A garbage certificate, then a new certificate beside the old key, then
    the new key: whether a new TLS connection gets through each time."""
    tmp = tempfile.mkdtemp(prefix="hardening-tls-")

    def run(*args):
        subprocess.run(["openssl", *args], cwd=tmp, check=True, capture_output=True)
    run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=ca", "-addext",
        "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    with open(os.path.join(tmp, "ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    for n in ["s1", "s2"]:
        run("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{n}.key", "-out", f"{n}.csr", "-subj", "/CN=placementd")
        run("x509", "-req", "-in", f"{n}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext", "-out", f"{n}.pem")
    path = lambda name: os.path.join(tmp, name)  # noqa: E731
    shutil.copy(path("s1.pem"), path("live.pem"))
    shutil.copy(path("s1.key"), path("live.key"))
    d = Daemon(binary, "--cpu_devices=1", f"--tls_cert={path('live.pem')}",
               f"--tls_key={path('live.key')}", "--tls_refresh_interval=1s")
    ca = open(path("ca.pem"), "rb").read()

    def call():
        channel = grpc.secure_channel(d.address, grpc.ssl_channel_credentials(ca),
                                      options=[("grpc.use_local_subchannel_pool", 1)])
        try:
            m["device_service_pb2_grpc"].DeviceServiceStub(channel).ListDevices(
                m["device_service_pb2"].ListDevicesRequest(), timeout=10)
            return "OK"
        except grpc.RpcError as e:
            return e.code().name
        finally:
            channel.close()
    with open(path("live.pem"), "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    time.sleep(3)
    garbage = call()
    shutil.copy(path("s2.pem"), path("live.pem"))
    time.sleep(3)
    half = call()
    shutil.copy(path("s2.key"), path("live.key"))
    time.sleep(3)
    print(f"  TLS rotation, new connection after: a garbage certificate {garbage}; the new "
          f"certificate beside the old key {half}; the new pair {call()}")
    d.stop()


def shm_shrink(binary, m):
    d = Daemon(binary, "--cpu_devices=1", "--allow_shm_regions")
    sessions = m["session_service_pb2_grpc"].SessionServiceStub(d.channel)
    session = sessions.OpenSession(m["session_service_pb2"].OpenSessionRequest()).session.id
    meta = [("placement-session", session)]
    name = f"/hardening-figures-{os.getpid()}"
    fd = os.open("/dev/shm" + name, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.ftruncate(fd, 16 * MIB)
    region = m["region_service_pb2_grpc"].RegionServiceStub(d.channel).RegisterRegion(
        m["region_service_pb2"].RegisterRegionRequest(shm_name=name), metadata=meta).region.region_id
    ts = m["tensor_service_pb2"]
    stub = m["tensor_service_pb2_grpc"].TensorServiceStub(d.channel)
    stop = threading.Event()

    def shrink():
        while not stop.is_set():
            os.ftruncate(fd, 0)
            os.ftruncate(fd, 16 * MIB)
    t = threading.Thread(target=shrink)
    t.start()
    codes = {}
    for _ in range(20):
        def requests():
            yield ts.UploadRequest(header=ts.UploadHeader(dtype=m["types_pb2"].DTYPE_U8,
                                                          shape=[16 * MIB]))
            yield ts.UploadRequest(region=m["region_service_pb2"].RegionSlice(
                region_id=region, size=16 * MIB))
        try:
            stub.Upload(requests(), metadata=meta, timeout=30)
            c = "OK"
        except grpc.RpcError as e:
            c = e.code().name
        codes[c] = codes.get(c, 0) + 1
        if not d.alive():
            break
    stop.set()
    t.join()
    os.close(fd)
    os.unlink("/dev/shm" + name)
    print(f"  shm region shrunk under 20 uploads: {codes}; daemon "
          f"{'alive' if d.alive() else f'died ({d.proc.returncode})'}")
    d.stop()


def smaller(binary, m):
    d = Daemon(binary, "--cpu_devices=2")
    dev = m["device_service_pb2_grpc"].DeviceServiceStub(d.channel)
    try:
        dev.GetBatchSizeRecommendation(
            m["device_service_pb2"].GetBatchSizeRecommendationRequest(hardware_name="z" * MIB))
        c = "OK"
    except grpc.RpcError as e:
        c = f"{e.code().name} ({len(e.details() or '')}-byte message)"
    print(f"  1 MiB hardware_name: {c}")
    pf = m["prefetch_service_pb2"]
    stream = m["prefetch_service_pb2_grpc"].PrefetchServiceStub(d.channel).Prefetch(
        iter([pf.PrefetchRequest(open=pf.PrefetchOpen(buffer_size=2**31 - 1))]))
    try:
        for _ in stream:
            pass
        c = "OK"
    except grpc.RpcError as e:
        c = e.code().name
    print(f"  Prefetch buffer_size INT32_MAX: {c}")
    sessions = m["session_service_pb2_grpc"].SessionServiceStub(d.channel)
    opened, start = 0, time.time()
    for _ in range(2000):
        try:
            sessions.OpenSession(m["session_service_pb2"].OpenSessionRequest())
            opened += 1
        except grpc.RpcError:
            pass
    print(f"  OpenSession x 2000 in {time.time() - start:.1f} s: {opened} opened")
    d.stop()
    d = Daemon(binary, "--cpu_devices=2")
    sessions = m["session_service_pb2_grpc"].SessionServiceStub(d.channel)
    session = sessions.OpenSession(m["session_service_pb2"].OpenSessionRequest()).session.id
    meshes = m["mesh_service_pb2_grpc"].MeshServiceStub(d.channel)
    meshes.CreateMesh(m["mesh_service_pb2"].CreateMeshRequest(
        mesh_id="in-session", axes=m["mesh_service_pb2"].AxesSpec(
            axes=[m["types_pb2"].MeshAxis(name="data", size=2)])),
        metadata=[("placement-session", session)])
    sessions.CloseSession(m["session_service_pb2"].CloseSessionRequest(session_id=session))
    left = len(meshes.ListMeshes(m["mesh_service_pb2"].ListMeshesRequest()).meshes)
    print(f"  a mesh made in a session, session closed: {left} mesh(es) left")
    # An unparseable message after a complete upload.
    ts = m["tensor_service_pb2"]
    upload = d.channel.stream_unary("/placement.v1.TensorService/Upload",
                                    request_serializer=None, response_deserializer=None)
    header = ts.UploadRequest(header=ts.UploadHeader(dtype=m["types_pb2"].DTYPE_U8, shape=[16]))
    try:
        upload(iter([header.SerializeToString(),
                     ts.UploadRequest(chunk=b"x" * 16).SerializeToString(), b"\xff" * 8]))
        c = "OK"
    except grpc.RpcError as e:
        c = e.code().name
    tensors = m["tensor_service_pb2_grpc"].TensorServiceStub(d.channel).List(
        ts.ListTensorsRequest()).tensors
    print(f"  garbage after a complete upload: {c}; {len(tensors)} tensor(s) committed")
    d.stop()
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    d = Daemon(binary, "--cpu_devices=8", f"--cpu_device_memory={physical}")
    print(f"  8 x {physical} bytes of CPU budget: "
          f"{'warned' if 'more than the host' in d.log() else 'no warning'}")
    d.stop()


def killed_client_region(binary, m):
    d = Daemon(binary, "--cpu_devices=1")
    status = m["daemon_service_pb2_grpc"].DaemonServiceStub(d.channel).GetStatus(
        m["daemon_service_pb2"].GetStatusRequest())
    # A client process (no session) registers a region, says so, then waits
    # to be killed.
    child = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, os, socket, sys, time, grpc
from placement.v1 import region_service_pb2, region_service_pb2_grpc
fd = os.memfd_create('killed', os.MFD_ALLOW_SEALING); os.ftruncate(fd, 1 << 20)
fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
address = {status.region_socket!r}
path = chr(0) + address[1:] if address.startswith('@') else address
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
    s.connect(path); socket.send_fds(s, [b'R'], [fd]); token = s.recv(512).decode().split(chr(10))[0]
region_service_pb2_grpc.RegionServiceStub(grpc.insecure_channel({d.address!r})).RegisterRegion(
    region_service_pb2.RegisterRegionRequest(fd_token=token))
print('registered', flush=True)
time.sleep(600)
"""], stdout=subprocess.PIPE, text=True)
    child.stdout.readline()
    child.kill()
    child.wait()
    time.sleep(2)
    left = m["daemon_service_pb2_grpc"].DaemonServiceStub(d.channel).GetStatus(
        m["daemon_service_pb2"].GetStatusRequest()).num_regions
    print(f"  region outside a session, client killed, 2 s later: {left} region(s) registered")
    d.stop()


def killed_clients(binary, m, clients=15):
    """`clients` Python clients (the placement library) uploading 4 MiB
    tensors in a loop, each SIGKILLed: the tensors and bytes left on the
    daemon afterwards, with TransportOptions(session="none") (what every
    client did before) and with the default own session (a 2 s lease here, to
    keep the run short; 60 s by default)."""
    d = Daemon(binary, "--cpu_devices=2", "--cpu_device_memory=2147483648")
    stub = m["daemon_service_pb2_grpc"].DaemonServiceStub(d.channel)
    tensors = m["tensor_service_pb2_grpc"].TensorServiceStub(d.channel)
    for own in (False, True):
        policy = "open" if own else "none"
        script = f"""
import numpy as np, placement
c = placement.Client({d.address!r}, placement.TransportOptions(session={policy!r},
                                                                 session_ttl=2))
x = np.ones(1 << 20, np.float32)
print('looping', flush=True)
while True:
    a = placement.device_put(x, 0, client=c)
    b = placement.device_put(x, 1, client=c)
    del a, b
"""
        children = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                     text=True) for _ in range(clients)]
        for child in children:
            child.stdout.readline()
        time.sleep(1)
        for child in children:
            child.kill()
            child.wait()
            child.stdout.close()
        time.sleep(2 + 2)  # the lease and the sweep, with room
        status = stub.GetStatus(m["daemon_service_pb2"].GetStatusRequest())
        print(f"  {clients} looping clients SIGKILLed, "
              f"{'own session (2 s lease)' if own else 'session=none'}, 4 s later: "
              f"{status.num_tensors} tensors, {status.device_bytes_in_use / MIB:.1f} MiB left")
        listed = tensors.List(m["tensor_service_pb2"].ListTensorsRequest(page_size=1000))
        ids = [t.id for t in listed.tensors]
        if ids:
            tensors.Delete(m["tensor_service_pb2"].DeleteTensorsRequest(tensor_ids=ids))
    d.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--placementd", required=True)
    args = parser.parse_args()
    load_stubs()
    m = pb()
    print(f"placementd: {args.placementd}")
    print("item 1 (memory charged per allocation):")
    flood(args.placementd, m, 2, 1, 60000, replicated=False)
    flood(args.placementd, m, 8, 8, 40000, replicated=True)
    print("item 2 (cache given back when idle):")
    churn(args.placementd, m)
    print("item 3 (region socket):")
    region_socket(args.placementd, m)
    print("item 4 (TLS rotation):")
    tls_rotation(args.placementd, m)
    print("item 6 (clients killed outside a session):")
    killed_clients(args.placementd, m)
    print("item 5 (shrinking shm region):")
    shm_shrink(args.placementd, m)
    print("item 7 (smaller ones):")
    smaller(args.placementd, m)
    killed_client_region(args.placementd, m)


if __name__ == "__main__":
    main()
