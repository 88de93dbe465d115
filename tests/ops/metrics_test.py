"""placementd's /metrics read by a real Prometheus text parser
(prometheus_client.parser from PyPI) after real traffic from grpcurl: exact
integer values that agree with the RPCs, counters, histograms for RPC latency
and transfer sizes, every metric documented in docs/operations.md, /healthz,
and the metrics address in the ready file."""
import base64
import json
import os
import re
import signal
import struct
import subprocess
import time
import unittest
import urllib.error
import urllib.request

import yaml

from prometheus_client.parser import text_string_to_metric_families

import ops_testing
from ops_testing import REPO, Daemon, run_grpcurl


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        return {f.name: f for f in text_string_to_metric_families(response.read().decode())}


def http_status(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def value(family, suffix="", **labels):
    """The one sample of `family` named name+suffix with exactly `labels`."""
    matches = [s.value for s in family.samples
               if s.name == family.name + suffix and labels == s.labels]
    assert len(matches) == 1, (family.name + suffix, labels, family.samples)
    return matches[0]


class mock_any:
    """Equal to any label value (build labels differ from build to build)."""

    def __eq__(self, other):
        return True


def exported_metrics(families):
    """metric name (counters with _total) -> type, the exposer's own excepted."""
    exported = {name: f.type for name, f in families.items() if not name.startswith("exposer_")}
    return {name + ("_total" if kind == "counter" else ""): kind
            for name, kind in exported.items()}


def promtool_check(test, url):
    """`promtool check metrics` (Debian's prometheus package) finds nothing to say."""
    promtool = os.environ.get("PROMTOOL_BIN", "")
    if not promtool or not os.access(promtool, os.X_OK):
        test.fail(f"no promtool at '{promtool}' (scripts/install_deps.sh installs prometheus)")
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read()
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                             timeout=60)
    test.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)
    test.assertEqual(checked.stdout + checked.stderr, b"")


def documented_metrics():
    """metric name -> type from the table in docs/operations.md."""
    with open(os.path.join(REPO, "docs", "operations.md")) as f:
        text = f.read()
    section = text.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    documented = {}
    for row in section.splitlines():
        if not row.startswith("| `"):
            continue
        cells = [c.strip() for c in row.strip("|").split("|")]
        for name in re.findall(r"`([a-z_]+)`", cells[0]):
            documented[name] = cells[1]
    return documented


class MetricsTest(unittest.TestCase):
    def setUp(self):
        ops_testing.grpcurl_binary()
        self.daemon = Daemon("--metrics_listen=127.0.0.1:0")
        self.addr = self.daemon.address

    def tearDown(self):
        self.daemon.stop()

    def grpcurl(self, method, request=None, stdin=None):
        data = "@" if stdin is not None else json.dumps(request or {})
        result = run_grpcurl("-plaintext", "-d", data, self.addr, method, stdin=stdin)
        return result

    def test_ready_file_records_both_addresses(self):
        self.assertEqual(len(self.daemon.ready_lines), 2, self.daemon.ready_lines)
        self.assertRegex(self.daemon.ready_lines[0], r"^127\.0\.0\.1:\d+$")
        self.assertRegex(self.daemon.ready_lines[1],
                         r"^metrics=http://127\.0\.0\.1:\d+/metrics$")
        self.assertNotEqual(self.daemon.metrics_url, "")

    def test_every_family_is_there_at_zero_from_the_start(self):
        families = scrape(self.daemon.metrics_url)
        documented = documented_metrics()
        # The cluster gauges exist only on a daemon of a cluster; the TLS
        # reload counters only on a daemon serving TLS (metrics_tls_test.py).
        cluster_only = {"placementd_cluster_epoch", "placementd_cluster_processes",
                        "placementd_cluster_state", "placementd_cluster_pending_tensors"}
        tls_only = {"placementd_tls_reloads_total", "placementd_tls_reload_failures_total"}
        self.assertEqual(set(documented) - set(exported_metrics(families)),
                         cluster_only | tls_only)
        for name, kind in documented.items():
            if name in cluster_only | tls_only:
                continue
            family = families[name[:-len("_total")] if kind == "counter" else name]
            self.assertTrue(family.samples, name)
        # Counters that move only on their event are at zero, by every known label.
        for name in ["placementd_prefetch_producer_blocked_seconds",
                     "placementd_prefetch_consumer_stall_seconds",
                     "placementd_region_registrations", "placementd_streams_reaped"]:
            self.assertEqual(value(families[name], "_total"), 0, name)
        for op in ["register", "unregister", "use"]:
            self.assertEqual(value(families["placementd_region_failures"], "_total", op=op), 0)
        for direction in ["in", "out"]:
            self.assertEqual(value(families["placementd_region_bytes"], "_total",
                                   direction=direction), 0)
        for collective in ["all_reduce", "all_gather", "reduce_scatter", "broadcast"]:
            self.assertEqual(value(families["placementd_collectives"], "_total",
                                   collective=collective), 0)
        for result in ["ok", "cancelled", "error"]:
            self.assertEqual(value(families["placementd_prefetch_streams"], "_total",
                                   result=result), 0)
        # Every served method: started and handled OK at zero, an empty histogram.
        for service in ["placement.v1.TensorService", "placement.v1.SessionService",
                        "grpc.reflection.v1alpha.ServerReflection"]:
            described = run_grpcurl("-plaintext", self.addr, "describe", service).stdout
            for method in re.findall(r"rpc (\w+) \(", described):
                started = [s for s in families["grpc_server_started"].samples
                           if s.labels.get("grpc_service") == service
                           and s.labels.get("grpc_method") == method]
                self.assertEqual(len(started), 1, (service, method))
        self.assertEqual(value(families["placementd_build_info"], version=mock_any(),
                               revision=mock_any(), grpc_version=mock_any()), 1)
        promtool_check(self, self.daemon.metrics_url)

    def test_dashboard_and_alerts_use_only_served_metrics(self):
        served = set(exported_metrics(scrape(self.daemon.metrics_url))) | set(documented_metrics())
        served |= {"up"}  # Prometheus's own, per scrape target

        def metric_names(expr):
            names = set()
            for token in re.findall(r"[a-z_:][a-z0-9_:]*(?=\s*[{\[)]|\s*$|\s*[/>=<])", expr):
                if token.startswith(("placementd_", "grpc_server_", "process_")) or token == "up":
                    names.add(re.sub(r"_(bucket|sum|count)$", "", token))
            return names

        with open(os.path.join(REPO, "deploy", "grafana", "placementd.json")) as f:
            dashboard = json.load(f)
        exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
        self.assertGreater(len(exprs), 20)
        with open(os.path.join(REPO, "deploy", "prometheus", "alerts.yml")) as f:
            rules = yaml.safe_load(f)
        alerts = {r["alert"]: r["expr"] for g in rules["groups"] for r in g["rules"]}
        self.assertEqual(set(alerts), {"PlacementdDown", "PlacementdDraining",
                                       "PlacementdDeviceMemoryHigh", "PlacementdClusterNotFormed",
                                       "PlacementdHighErrorRate"})
        used = set()
        for expr in exprs + list(alerts.values()):
            names = metric_names(expr)
            self.assertTrue(names, expr)
            used |= names
        self.assertEqual(used - served, set())
        # The dashboard covers what operators watch.
        titles = " ".join(p["title"] for p in dashboard["panels"]).lower()
        for word in ["devices", "memory", "tensors", "streams", "rpc rate", "latency", "errors",
                     "cluster state"]:
            self.assertIn(word, titles)

    def test_exposition_after_real_traffic(self):
        # f32[1000, 300]: 1.2 MB, uploaded in 5 chunks over 4 devices.
        data = struct.pack("<300000f", *range(300000))
        header = {"header": {"name": "m", "dtype": "DTYPE_F32", "shape": [1000, 300],
                             "rule": {"placement": {"sharding": {
                                 "mesh_id": "m4", "spec": {"dims": [{"axes": ["data"]}]}}}}}}
        created = self.grpcurl("placement.v1.MeshService/CreateMesh",
                               {"mesh_id": "m4", "axes": {"axes": [{"name": "data", "size": 4}]}})
        self.assertEqual(created.returncode, 0, created.stderr)
        step = 240000
        stream = [json.dumps(header)] + [
            json.dumps({"chunk": base64.b64encode(data[i:i + step]).decode()})
            for i in range(0, len(data), step)]
        upload = self.grpcurl("placement.v1.TensorService/Upload", stdin="\n".join(stream))
        self.assertEqual(upload.returncode, 0, upload.stderr)
        tensor_id = json.loads(upload.stdout)["tensor"]["id"]
        download = self.grpcurl("placement.v1.TensorService/Download", {"tensor_id": tensor_id})
        self.assertEqual(download.returncode, 0, download.stderr)
        bad = self.grpcurl("placement.v1.DeviceService/GetBatchSizeRecommendation",
                           {"hardware_name": "tpu_v9"})
        self.assertEqual(bad.returncode, 64 + 3, bad.stderr)  # grpcurl: 64 + INVALID_ARGUMENT
        reduced = self.grpcurl("placement.v1.CollectiveService/AllReduce",
                               {"tensor_id": tensor_id, "op_name": "sum", "name": "m_sum"})
        self.assertEqual(reduced.returncode, 0, reduced.stderr)
        prefetch = [{"open": {"buffer_size": 1}},
                    {"batch": {"arrays": [{"key": "x", "dtype": "DTYPE_F32", "shape": [2]}]}},
                    {"chunk": {"array_index": 0, "data": base64.b64encode(data[:8]).decode()}}]
        streamed = self.grpcurl("placement.v1.PrefetchService/Prefetch",
                                stdin="\n".join(json.dumps(m) for m in prefetch))
        self.assertEqual(streamed.returncode, 0, streamed.stderr)
        batch = [{"header": {"name": "b", "arrays": [{"key": "x", "dtype": "DTYPE_U8",
                                                       "shape": [3]}]}},
                 {"chunk": {"array_index": 0, "data": base64.b64encode(b"abc").decode()}}]
        batched = self.grpcurl("placement.v1.TensorService/UploadBatch",
                               stdin="\n".join(json.dumps(m) for m in batch))
        self.assertEqual(batched.returncode, 0, batched.stderr)
        # A region id that does not exist: a refused region op.
        unknown = self.grpcurl("placement.v1.RegionService/UnregisterRegion",
                               {"region_id": "r-00000000000000000000000000000000"})
        self.assertEqual(unknown.returncode, 64 + 5, unknown.stderr)  # NOT_FOUND
        devices = json.loads(self.grpcurl("placement.v1.DeviceService/ListDevices").stdout)

        families = scrape(self.daemon.metrics_url)

        # Gauges are exact integers and agree with ListDevices (300000 bytes per device).
        in_use = families["placementd_device_memory_in_use_bytes"]
        for d in devices["devices"]:
            d.setdefault("id", "0")  # proto3 JSON omits zeros
            got = value(in_use, device=d["id"], platform="cpu")
            self.assertEqual(got, int(d.get("memory_in_use_bytes", "0")))
            self.assertEqual(value(families["placementd_device_memory_limit_bytes"],
                                   device=d["id"], platform="cpu"),
                             int(d["memory_limit_bytes"]))
        self.assertEqual(value(in_use, device="0", platform="cpu"), 2 * 1200000 // 4 + 3)
        self.assertEqual(value(in_use, device="4", platform="cpu"), 0)
        # m (1.2 MB over 4 devices), its sum (300 KB per device, replicated), b/x (3 bytes).
        self.assertEqual(value(families["placementd_tensor_device_bytes"]), 2400003)
        self.assertEqual(value(families["placementd_tensors"]), 3)
        self.assertEqual(value(families["placementd_meshes"]), 1)
        self.assertEqual(value(families["placementd_up"]), 1)

        # Stock gRPC server metrics (the parser strips _total from the family name).
        handled = families["grpc_server_handled"]
        self.assertEqual(handled.type, "counter")
        list_devices = dict(grpc_type="unary", grpc_service="placement.v1.DeviceService",
                            grpc_method="ListDevices")
        self.assertEqual(value(handled, "_total", grpc_code="OK", **list_devices), 1)
        self.assertEqual(value(families["grpc_server_started"], "_total", **list_devices), 1)
        self.assertEqual(value(handled, "_total", grpc_code="InvalidArgument", grpc_type="unary",
                               grpc_service="placement.v1.DeviceService",
                               grpc_method="GetBatchSizeRecommendation"), 1)
        upload = dict(grpc_type="client_stream", grpc_service="placement.v1.TensorService",
                      grpc_method="Upload")
        self.assertEqual(value(handled, "_total", grpc_code="OK", **upload), 1)
        # The header and five chunks in, one response out.
        self.assertEqual(value(families["grpc_server_msg_received"], "_total", **upload), 6)
        self.assertEqual(value(families["grpc_server_msg_sent"], "_total", **upload), 1)
        # A method never called is there at zero (every served method is).
        self.assertEqual(value(handled, "_total", grpc_code="OK", grpc_type="unary",
                               grpc_service="placement.v1.MeshService",
                               grpc_method="DeleteMesh"), 0)
        self.assertEqual(value(families["grpc_server_started"], "_total", grpc_type="unary",
                               grpc_service="grpc.health.v1.Health", grpc_method="Check"), 0)

        # Latency histogram: one observation per call, cumulative buckets.
        duration = families["grpc_server_handling_seconds"]
        self.assertEqual(duration.type, "histogram")
        self.assertEqual(value(duration, "_count", **upload), 1)
        buckets = [s for s in duration.samples
                   if s.name.endswith("_bucket") and s.labels["grpc_method"] == "Upload"]
        counts = [s.value for s in buckets]
        self.assertEqual(counts, sorted(counts))
        self.assertEqual(buckets[-1].labels["le"], "+Inf")
        self.assertEqual(counts[-1], 1)

        # Transfer sizes: the upload's request bytes and the download's response
        # bytes, each the tensor's bytes plus a little framing.
        received = families["placementd_rpc_received_bytes"]
        upload_method = dict(grpc_service="placement.v1.TensorService", grpc_method="Upload")
        self.assertEqual(value(received, "_count", **upload_method), 1)
        self.assertGreaterEqual(value(received, "_sum", **upload_method), len(data))
        self.assertLess(value(received, "_sum", **upload_method), len(data) + 300)
        # Every method whose requests stream in (per reflection) is measured.
        streamed_in = set()
        for service in ["placement.v1.TensorService", "placement.v1.PrefetchService",
                        "placement.v1.CollectiveService", "placement.v1.MeshService",
                        "placement.v1.DeviceService", "placement.v1.DaemonService"]:
            described = run_grpcurl("-plaintext", self.addr, "describe", service).stdout
            for method in re.findall(r"rpc (\w+) \( stream ", described):
                streamed_in.add((service, method))
        self.assertEqual(streamed_in, {("placement.v1.TensorService", "Upload"),
                                       ("placement.v1.TensorService", "UploadBatch"),
                                       ("placement.v1.PrefetchService", "Prefetch")})
        for service, method in streamed_in:
            self.assertEqual(value(received, "_count", grpc_service=service, grpc_method=method),
                             1, method)
        sent = families["placementd_rpc_sent_bytes"]
        download_method = dict(grpc_service="placement.v1.TensorService", grpc_method="Download")
        self.assertGreaterEqual(value(sent, "_sum", **download_method), len(data))
        self.assertLess(value(sent, "_sum", **download_method), len(data) + 300)
        self.assertEqual(value(sent, "_bucket", le="1048576", **download_method), 0)
        self.assertEqual(value(sent, "_bucket", le="4194304", **download_method), 1)

        # Every metric is documented in operations.md with its type, and everything
        # documented is exported, except the cluster's (only on a daemon of a cluster,
        # docs/cluster.md; tests/cluster covers clusters).
        documented = documented_metrics()
        exported = exported_metrics(families)
        self.assertEqual(exported, {k: v for k, v in documented.items() if k in exported})
        # The cluster gauges exist only on a daemon of a cluster; the TLS
        # reload counters only on a daemon serving TLS (metrics_tls_test.py).
        cluster_only = {"placementd_cluster_epoch", "placementd_cluster_processes",
                        "placementd_cluster_state", "placementd_cluster_pending_tensors"}
        tls_only = {"placementd_tls_reloads_total", "placementd_tls_reload_failures_total"}
        self.assertEqual(set(documented) - set(exported), cluster_only | tls_only)
        # The tensors are the default tenant's (no authentication).
        self.assertEqual(value(families["placementd_tenant_tensors"], tenant="(default)"), 3)
        self.assertEqual(value(families["placementd_build_info"], version=mock_any(),
                               revision=mock_any(), grpc_version=mock_any()), 1)
        self.assertGreater(value(families["process_resident_memory_bytes"]), 1 << 20)
        self.assertGreater(value(families["process_open_fds"]), 3)
        self.assertAlmostEqual(value(families["process_start_time_seconds"]), time.time(),
                               delta=600)
        promtool_check(self, self.daemon.metrics_url)
        self.assertEqual(value(families["placementd_collectives"], "_total",
                               collective="all_reduce"), 1)
        self.assertEqual(value(families["placementd_region_failures"], "_total", op="unregister"),
                         1)
        self.assertEqual(value(families["placementd_collective_bytes"], "_total",
                               collective="all_reduce"), 1200000)
        self.assertEqual(value(families["placementd_prefetch_streams"], "_total", result="ok"), 1)
        self.assertEqual(value(families["placementd_prefetch_bytes_staged"], "_total"), 8)

    def test_healthz_and_up_follow_the_drain(self):
        base = self.daemon.metrics_url.rsplit("/", 1)[0]
        self.assertEqual(http_status(base + "/healthz"), (200, "ok\n"))
        self.assertEqual(http_status(base + "/nope")[0], 404)
        # An open prefetch stream is an in-flight call: the drain waits for it.
        stream = subprocess.Popen(
            [ops_testing.grpcurl_binary(), "-plaintext", "-d", "@", self.addr,
             "placement.v1.PrefetchService/Prefetch"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stream.stdin.write(json.dumps({"open": {"buffer_size": 1}}) + "\n")
        stream.stdin.flush()
        deadline = time.monotonic() + 10
        while value(scrape(self.daemon.metrics_url)["placementd_prefetch_streams_open"]) != 1:
            self.assertLess(time.monotonic(), deadline, "the stream never opened")
            time.sleep(0.02)
        self.daemon.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while http_status(base + "/healthz")[0] != 503:
            self.assertLess(time.monotonic(), deadline, "healthz never turned 503")
            time.sleep(0.02)
        self.assertEqual(http_status(base + "/healthz"), (503, "draining\n"))
        families = scrape(self.daemon.metrics_url)
        self.assertEqual(value(families["placementd_up"]), 0)
        self.assertEqual(value(families["placementd_inflight_calls"]), 1)
        stream.stdin.close()  # end of data: the stream finishes, the drain completes
        self.assertEqual(stream.wait(timeout=30), 0, stream.stderr.read())
        stream.stdout.close()
        stream.stderr.close()
        self.assertEqual(self.daemon.proc.wait(timeout=30), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
