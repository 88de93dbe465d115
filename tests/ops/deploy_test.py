"""The deploy files agree with placementd and with each other: the example
flagfiles and the Kubernetes ConfigMaps' flagfiles start real daemons (the
default one authenticated: TLS and a token, with certificates made here by
openssl; the cluster ones a real two-daemon cluster, through the
StatefulSet's own entrypoint), every supervisor's grace period before SIGKILL
covers the drain it gives, the manifests and their overlays (gpu, insecure)
render and match the Kubernetes schemas, and the cluster StatefulSet, its
Services and its flagfile name the same things."""
import copy
import hashlib
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from ops_testing import REPO, Daemon, make_pki, run_grpcurl

try:
    import yaml
except ImportError:  # PyYAML: scripts/python_env.sh installs it
    yaml = None
try:
    import kubernetes_validate
except ImportError:  # optional, like jax: scripts/python_env.sh tries to install it
    kubernetes_validate = None

SHUTDOWN_SLACK_S = 2  # after the drain: server shutdown and the metrics exposer


def read(*parts):
    with open(os.path.join(REPO, *parts)) as f:
        return f.read()


def seconds(flag_text):
    m = re.search(r"^\s*--drain_timeout=(\d+)s\s*$", flag_text, re.M)
    assert m, "no --drain_timeout=<N>s"
    return int(m.group(1))


def configmap_flags(*path):
    text = read("deploy", "kubernetes", *(path or ("configmap.yaml",)))
    block = text.split("placementd.flags: |\n", 1)[1]
    return "\n".join(line[4:] for line in block.splitlines() if line.startswith("    "))


def strategic_merge(base, patch):
    """kustomize's strategic merge for what the overlays use: maps merge key
    by key, null deletes, lists of named maps merge by name, anything else
    replaces."""
    for key, value in patch.items():
        if value is None:
            base.pop(key, None)
        elif isinstance(value, dict) and isinstance(base.get(key), dict):
            strategic_merge(base[key], value)
        elif (isinstance(value, list) and isinstance(base.get(key), list)
              and all(isinstance(v, dict) and "name" in v for v in value + base[key])):
            by_name = {item["name"]: item for item in base[key]}
            for item in value:
                if item["name"] in by_name:
                    strategic_merge(by_name[item["name"]], item)
                else:
                    base[key].append(copy.deepcopy(item))
        else:
            base[key] = copy.deepcopy(value)


def render(directory):
    """The objects `kubectl apply -k directory` would apply: its resources
    (files, or directories rendered in turn) with its patches applied."""
    (k,) = load_documents(os.path.join(directory, "kustomization.yaml"))
    objects = []
    for resource in k.get("resources", []):
        path = os.path.normpath(os.path.join(directory, resource))
        objects += render(path) if os.path.isdir(path) else load_documents(path)
    for entry in k.get("patches", []):
        (patch,) = load_documents(os.path.join(directory, entry["path"]))
        targets = [o for o in objects if (o["kind"], o["metadata"]["name"]) ==
                   (patch["kind"], patch["metadata"]["name"])]
        assert len(targets) == 1, (directory, entry, len(targets))
        strategic_merge(targets[0], patch)
    return objects


def kustomizations():
    """Every directory under deploy/kubernetes with a kustomization.yaml."""
    out = []
    for root, _, files in os.walk(os.path.join(REPO, "deploy", "kubernetes")):
        if "kustomization.yaml" in files:
            out.append(root)
    return sorted(out)


def rendered(*parts):
    """{(kind, name): object} of the kustomization at deploy/kubernetes/<parts>."""
    return {(o["kind"], o["metadata"]["name"]): o
            for o in render(os.path.join(REPO, "deploy", "kubernetes", *parts))}


def flags_of(objects):
    return objects[("ConfigMap", "placementd-config")]["data"]["placementd.flags"]


def flag(flag_text, name):
    """The value of the last --name=value line (the one Abseil keeps), or None."""
    values = re.findall(rf"^\s*--{name}=(.*?)\s*$", flag_text, re.M)
    return values[-1] if values else None


def duration_s(text):
    m = re.fullmatch(r"(\d+)(s|m)", text)
    assert m, f"not a duration in s or m: {text}"
    return int(m.group(1)) * (60 if m.group(2) == "m" else 1)


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class ClusterNode:
    """One placementd of a cluster, started through `argv` without waiting
    (none is ready before all have joined); wait_ready() then reads its
    ready file, stop() ends it (stderr() still answers), close() also
    drops the captured stderr."""

    def __init__(self, argv, ready_path, env=None):
        self.ready_path = ready_path
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self._stderr,
                                     env={**os.environ, **(env or {})})

    def stderr(self):
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")

    def wait_ready(self, timeout=60.0):
        """The ready file's lines: address first, then key=value lines."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(self.ready_path) and os.path.getsize(self.ready_path) > 0:
                time.sleep(0.05)  # the file is written in one go; let it finish
                with open(self.ready_path) as f:
                    return f.read().splitlines()
            if self.proc.poll() is not None:
                raise AssertionError(f"placementd exited {self.proc.returncode}: {self.stderr()}")
            time.sleep(0.05)
        raise AssertionError(f"placementd not ready after {timeout}s: {self.stderr()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode  # stderr() stays readable

    def close(self):
        self.stop()
        self._stderr.close()


def ready_fields(lines):
    return dict(line.split("=", 1) for line in lines[1:] if "=" in line)


def manifest_files():
    """Every Kubernetes YAML file under deploy/kubernetes, recursively."""
    out = []
    for root, _, files in os.walk(os.path.join(REPO, "deploy", "kubernetes")):
        out += [os.path.join(root, f) for f in sorted(files) if f.endswith(".yaml")]
    return sorted(out)


def load_documents(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


class DeployTest(unittest.TestCase):
    def start_with_flagfile(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".flags", delete=False) as f:
            f.write(text)
        self.addCleanup(os.unlink, f.name)
        # Later flags override the file's addresses and paths for this machine.
        return Daemon("--flagfile=" + f.name, "--listen=127.0.0.1:0", "--backend=cpu",
                      "--metrics_listen=127.0.0.1:0", "--cpu_device_memory=67108864")

    def test_example_flagfile_starts_the_daemon(self):
        with self.start_with_flagfile(read("deploy", "placementd.flags")) as daemon:
            self.assertTrue(daemon.metrics_url.startswith("http://127.0.0.1:"))

    def test_configmap_flagfile_starts_an_authenticated_daemon(self):
        # The Secrets' files, made here: a server certificate for 127.0.0.1 (tls.crt,
        # tls.key) and a credentials file holding one token's digest.
        secrets = tempfile.TemporaryDirectory(prefix="placement-deploy-secrets-")
        self.addCleanup(secrets.cleanup)
        tls = os.path.join(secrets.name, "tls")
        auth = os.path.join(secrets.name, "auth")
        os.makedirs(tls)
        os.makedirs(auth)
        make_pki(tls)
        os.rename(os.path.join(tls, "server.pem"), os.path.join(tls, "tls.crt"))
        os.rename(os.path.join(tls, "server.key"), os.path.join(tls, "tls.key"))
        token = "deploy-test-" + "%032x" % random.getrandbits(128)
        with open(os.path.join(auth, "credentials"), "w") as f:
            f.write(f"token sha256:{hashlib.sha256(token.encode()).hexdigest()} team-a user\n")
        text = configmap_flags().replace("/etc/placementd/", secrets.name + "/")
        self.assertNotIn("--allow_insecure", text)
        with self.start_with_flagfile(text) as daemon:
            self.assertRegex(daemon.address, r"^127\.0\.0\.1:\d+$")
            ca = os.path.join(tls, "ca.pem")
            method = "placement.v1.DeviceService/ListDevices"
            ok = run_grpcurl("-cacert", ca, "-H", f"authorization: Bearer {token}",
                             daemon.address, method)
            self.assertEqual(ok.returncode, 0, ok.stderr)
            anonymous = run_grpcurl("-cacert", ca, daemon.address, method)
            self.assertEqual(anonymous.returncode, 64 + 16, anonymous.stderr)  # UNAUTHENTICATED
            plaintext = run_grpcurl("-plaintext", daemon.address, method)
            self.assertNotEqual(plaintext.returncode, 0)

    def test_insecure_and_gpu_overlay_flagfiles_start_the_daemon(self):
        insecure = flags_of(rendered("overlays", "insecure"))
        self.assertIn("--allow_insecure", insecure)
        self.assertIsNone(flag(insecure, "auth_file"))
        with self.start_with_flagfile(insecure) as daemon:
            listed = run_grpcurl("-plaintext", daemon.address,
                                 "placement.v1.DeviceService/ListDevices")
            self.assertEqual(listed.returncode, 0, listed.stderr)
        gpu = flags_of(rendered("overlays", "gpu"))
        self.assertEqual(flag(gpu, "backend"), "cuda")
        self.assertEqual(flag(gpu, "auth_file"), "/etc/placementd/auth/credentials")
        # This machine has no GPU: the test's own --backend=cpu (after the file) wins; the
        # TLS and token lines are the default's (tested above), left out here.
        lines = [line for line in gpu.splitlines()
                 if not line.startswith(("--tls_", "--auth_file"))]
        with self.start_with_flagfile("\n".join(lines + ["--allow_insecure"])) as daemon:
            self.assertRegex(daemon.address, r"^127\.0\.0\.1:\d+$")

    def test_grace_periods_cover_the_drain(self):
        unit = read("deploy", "systemd", "placementd.service")
        stop_sec = int(re.search(r"^TimeoutStopSec=(\d+)s$", unit, re.M).group(1))
        self.assertGreaterEqual(stop_sec, seconds(read("deploy", "placementd.flags")) +
                                SHUTDOWN_SLACK_S)
        daemonset = read("deploy", "kubernetes", "daemonset.yaml")
        grace = int(re.search(r"terminationGracePeriodSeconds: (\d+)", daemonset).group(1))
        self.assertGreaterEqual(grace, seconds(configmap_flags()) + SHUTDOWN_SLACK_S)
        self.assertGreaterEqual(stop_sec, seconds(read("deploy", "systemd",
                                                       "placementd-cluster.flags")) +
                                SHUTDOWN_SLACK_S)
        statefulset = read("deploy", "kubernetes", "cluster", "statefulset.yaml")
        sts_grace = int(re.search(r"terminationGracePeriodSeconds: (\d+)", statefulset).group(1))
        self.assertGreaterEqual(sts_grace,
                                seconds(configmap_flags("cluster", "configmap.yaml")) +
                                SHUTDOWN_SLACK_S)
        # deploy.md's table says the same numbers.
        deploy_md = read("docs", "deploy.md")
        self.assertIn(f"`TimeoutStopSec={stop_sec}s`", deploy_md)
        self.assertIn(f"`terminationGracePeriodSeconds: {grace}`", deploy_md)
        self.assertIn(f"StatefulSet | `terminationGracePeriodSeconds: {sts_grace}`", deploy_md)
        # The image: see container_test.DockerfileTest.test_stop_grace_covers_the_drain.


class ManifestTest(unittest.TestCase):
    """Every manifest parses, names what Kubernetes needs, is listed by its
    kustomization, and (with kubernetes-validate) matches the API schemas."""

    @classmethod
    def setUpClass(cls):
        if yaml is None:
            raise unittest.SkipTest("PyYAML is not installed (scripts/python_env.sh installs it)")

    def test_manifests_parse_and_kustomizations_list_them(self):
        files = manifest_files()
        self.assertIn(os.path.join(REPO, "deploy", "kubernetes", "cluster", "statefulset.yaml"),
                      files)
        for path in files:
            where = os.path.relpath(path, REPO)
            documents = load_documents(path)
            self.assertTrue(documents, where)
            for doc in documents:
                self.assertIn("apiVersion", doc, where)
                self.assertIn("kind", doc, where)
                if doc["kind"] == "Kustomization":
                    directory = os.path.dirname(path)
                    local = set()
                    for resource in doc.get("resources", []):
                        target = os.path.normpath(os.path.join(directory, resource))
                        if os.path.isdir(target):  # a base: a kustomization of its own
                            self.assertTrue(os.path.exists(
                                os.path.join(target, "kustomization.yaml")), where)
                        else:
                            local.add(resource)
                    local |= {p["path"] for p in doc.get("patches", [])}
                    present = {f for f in os.listdir(directory)
                               if f.endswith(".yaml") and f != "kustomization.yaml"}
                    self.assertEqual(local, present, where)
                else:
                    self.assertTrue(doc["metadata"]["name"], where)
                    if doc["kind"] != "Namespace":
                        self.assertEqual(doc["metadata"]["namespace"], "placement", where)

    def test_every_kustomization_renders_to_schema_valid_objects(self):
        directories = [os.path.relpath(d, REPO) for d in kustomizations()]
        self.assertEqual(directories, ["deploy/kubernetes", "deploy/kubernetes/cluster",
                                       "deploy/kubernetes/overlays/gpu",
                                       "deploy/kubernetes/overlays/insecure"])
        for directory in kustomizations():
            objects = render(directory)
            names = [(o["kind"], o["metadata"]["name"]) for o in objects]
            self.assertEqual(len(names), len(set(names)), directory)
        if kubernetes_validate is None:
            self.skipTest("kubernetes-validate is not installed (scripts/python_env.sh tries "
                          "to install it from PyPI)")
        # 1.27: the first release with gRPC probes on by default (GA).
        versions = ["1.27.0", kubernetes_validate.latest_version()]
        for directory in kustomizations():
            for doc in render(directory):
                for version in versions:
                    with self.subTest(kustomization=os.path.relpath(directory, REPO),
                                      kind=doc["kind"], version=version):
                        kubernetes_validate.validate(doc, version, strict=True)


class DaemonSetVariantsTest(unittest.TestCase):
    """The DaemonSet as shipped (authenticated), its overlays, and the
    node-local Service."""

    @classmethod
    def setUpClass(cls):
        if yaml is None:
            raise unittest.SkipTest("PyYAML is not installed (scripts/python_env.sh installs it)")
        cls.default = rendered()
        cls.insecure = rendered("overlays", "insecure")
        cls.gpu = rendered("overlays", "gpu")

    @staticmethod
    def container(objects):
        (container,) = objects[("DaemonSet", "placementd")]["spec"]["template"]["spec"][
            "containers"]
        return container

    @staticmethod
    def volumes(objects):
        spec = objects[("DaemonSet", "placementd")]["spec"]["template"]["spec"]
        return {v["name"]: v for v in spec["volumes"]}

    def test_the_default_is_authenticated(self):
        flags = flags_of(self.default)
        self.assertNotIn("--allow_insecure", flags)
        self.assertEqual(flag(flags, "tls_cert"), "/etc/placementd/tls/tls.crt")
        self.assertEqual(flag(flags, "tls_key"), "/etc/placementd/tls/tls.key")
        self.assertEqual(flag(flags, "auth_file"), "/etc/placementd/auth/credentials")
        volumes = self.volumes(self.default)
        for name, secret in (("tls", "placementd-tls"), ("auth", "placementd-auth")):
            self.assertEqual(volumes[name]["secret"]["secretName"], secret)
            self.assertNotIn("optional", volumes[name]["secret"])  # required
        container = self.container(self.default)
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        self.assertEqual(mounts["tls"], "/etc/placementd/tls")
        self.assertEqual(mounts["auth"], "/etc/placementd/auth")
        # The kubelet's gRPC probes cannot speak TLS: HTTPS /healthz on the metrics port.
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            self.assertEqual(container[probe]["httpGet"],
                             {"path": "/healthz", "port": "metrics", "scheme": "HTTPS"}, probe)
            self.assertNotIn("grpc", container[probe])
        self.assertEqual(flag(flags, "metrics_listen"), "0.0.0.0:9464")

    def test_the_insecure_overlay_says_so(self):
        flags = flags_of(self.insecure)
        self.assertIn("--allow_insecure", flags)
        self.assertIsNone(flag(flags, "tls_cert"))
        container = self.container(self.insecure)
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            self.assertEqual(container[probe]["grpc"], {"port": 50051}, probe)
            self.assertNotIn("httpGet", container[probe])
        for name in ("tls", "auth"):
            self.assertTrue(self.volumes(self.insecure)[name]["secret"]["optional"])

    def test_the_gpu_overlay_requests_gpus_and_the_cuda_image(self):
        pod = self.gpu[("DaemonSet", "placementd")]["spec"]["template"]["spec"]
        container = self.container(self.gpu)
        self.assertGreaterEqual(int(container["resources"]["limits"]["nvidia.com/gpu"]), 1)
        self.assertEqual(pod["nodeSelector"], {"nvidia.com/gpu.present": "true"})
        self.assertEqual(container["image"], "placementd:cuda")
        self.assertIn({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                      pod["tolerations"])
        # Authenticated like the default, with the CUDA backend required.
        self.assertNotIn("--allow_insecure", flags_of(self.gpu))
        self.assertEqual(flag(flags_of(self.gpu), "backend"), "cuda")
        # Everything else is the default's (same probes, security context, mounts).
        default = self.container(self.default)
        for key in ("startupProbe", "securityContext", "volumeMounts", "args", "ports"):
            self.assertEqual(container[key], default[key], key)
        # The image it names is the Dockerfile's CUDA target: a CUDA runtime base with the
        # backend compiled in, the same user, entrypoint and ports as the CPU image.
        dockerfile = read("Dockerfile")
        stages = re.findall(r"^FROM (\S+) AS (\S+)$", dockerfile, re.M)
        self.assertIn(("nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu24.04", "runtime-cuda"), stages)
        self.assertIn(("nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04", "build-cuda"), stages)
        self.assertRegex(dockerfile, r"(?m)^ARG CUDA_VERSION=\d+\.\d+\.\d+$")
        cuda_stage = dockerfile.split("AS runtime-cuda", 1)[1].split("\nFROM ", 1)[0]
        build_stage = dockerfile.split("AS build-cuda", 1)[1].split("\nFROM ", 1)[0]
        self.assertIn("-DPLACEMENT_WITH_CUDA=ON", build_stage)
        self.assertIn("USER 10001", cuda_stage)
        self.assertIn('ENTRYPOINT ["/opt/placement/bin/placementd"]', cuda_stage)
        self.assertIn("--backend=cuda", cuda_stage)
        cpu_stage = dockerfile.rsplit("\nFROM ", 1)[1]
        self.assertTrue(cpu_stage.startswith("debian:12-slim"), "the CPU image stays the default")

    def test_node_local_service(self):
        service = self.default[("Service", "placementd-local")]
        spec = service["spec"]
        self.assertEqual(spec["internalTrafficPolicy"], "Local")
        self.assertNotEqual(spec.get("clusterIP"), "None")  # kube-proxy must route it
        pod_labels = self.default[("DaemonSet", "placementd")]["spec"]["template"]["metadata"][
            "labels"]
        self.assertEqual(spec["selector"], pod_labels)
        self.assertEqual([(p["name"], p["port"], p["targetPort"]) for p in spec["ports"]],
                         [("grpc", 50051, "grpc")])
        self.assertIn("placementd-local.placement.svc", read("docs", "deploy.md"))


def cluster_objects():
    """{kind: [documents]} of deploy/kubernetes/cluster."""
    out = {}
    for path in manifest_files():
        if os.path.basename(os.path.dirname(path)) != "cluster":
            continue
        for doc in load_documents(path):
            out.setdefault(doc["kind"], []).append(doc)
    return out


class ClusterManifestTest(unittest.TestCase):
    """The StatefulSet variant: its pods find each other, the ordinal becomes
    --process_index, and the numbers agree with the flagfile."""

    @classmethod
    def setUpClass(cls):
        if yaml is None:
            raise unittest.SkipTest("PyYAML is not installed (scripts/python_env.sh installs it)")
        objects = cluster_objects()
        (cls.sts,) = objects["StatefulSet"]
        (cls.configmap,) = objects["ConfigMap"]
        cls.services = {s["metadata"]["name"]: s for s in objects["Service"]}
        cls.flags = cls.configmap["data"]["placementd.flags"]
        cls.pod = cls.sts["spec"]["template"]["spec"]
        (cls.container,) = cls.pod["containers"]

    def script(self):
        command = self.container["command"]
        self.assertEqual(command[:2], ["/bin/sh", "-c"])
        return command[2]

    def run_entrypoint(self, pod_name, pod_ip):
        # The daemon replaced by echo: what would it be started with?
        script = self.script().replace("/opt/placement/bin/placementd", "echo")
        argv = ["/bin/sh", "-c", script, *self.container["command"][3:], *self.container["args"]]
        env = {"POD_NAME": pod_name, "POD_IP": pod_ip, "PATH": "/bin:/usr/bin"}
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=10)

    def test_pods_find_each_other(self):
        spec = self.sts["spec"]
        name = self.sts["metadata"]["name"]
        peers = self.services[spec["serviceName"]]
        # Headless, and publishing pods before they are ready: no daemon is
        # ready before the cluster formed, and forming needs the names.
        self.assertEqual(peers["spec"]["clusterIP"], "None")
        self.assertTrue(peers["spec"]["publishNotReadyAddresses"])
        # All pods at once: OrderedReady would wait for placementd-0's readiness.
        self.assertEqual(spec["podManagementPolicy"], "Parallel")
        self.assertEqual(spec["replicas"], int(flag(self.flags, "num_processes")))
        ports = {p["name"]: p["containerPort"] for p in self.container["ports"]}
        peer_port = ports["peer"]
        self.assertEqual(flag(self.flags, "peer_listen"), f"0.0.0.0:{peer_port}")
        self.assertEqual(flag(self.flags, "listen"), f"0.0.0.0:{ports['grpc']}")
        self.assertIn({"name": "peer", "port": peer_port, "targetPort": "peer", "protocol": "TCP",
                       "appProtocol": "grpc"}, peers["spec"]["ports"])
        namespace = self.sts["metadata"]["namespace"]
        self.assertEqual(flag(self.flags, "coordinator"),
                         f"{name}-0.{peers['metadata']['name']}.{namespace}.svc.cluster.local:"
                         f"{peer_port}")
        self.assertIn(f'--peer_advertise_address="$host:{peer_port}"', self.script())

    def test_selectors_pick_the_cluster_pods_and_not_the_daemonset(self):
        labels = self.sts["spec"]["template"]["metadata"]["labels"]
        selectors = [self.sts["spec"]["selector"]["matchLabels"]]
        selectors += [s["spec"]["selector"] for s in self.services.values()]
        anti = self.pod["affinity"]["podAntiAffinity"]
        (term,) = anti["requiredDuringSchedulingIgnoredDuringExecution"]
        self.assertEqual(term["topologyKey"], "kubernetes.io/hostname")
        selectors.append(term["labelSelector"]["matchLabels"])
        for selector in selectors:
            self.assertLessEqual(selector.items(), labels.items())
        with open(os.path.join(REPO, "deploy", "kubernetes", "daemonset.yaml")) as f:
            daemonset = yaml.safe_load(f)
        # Neither workload's selector picks the other's pods.
        self.assertFalse(daemonset["spec"]["selector"]["matchLabels"].items() <= labels.items())
        self.assertFalse(self.sts["spec"]["selector"]["matchLabels"].items() <=
                         daemonset["spec"]["template"]["metadata"]["labels"].items())
        volumes = {v["name"]: v for v in self.pod["volumes"]}
        self.assertEqual(volumes["config"]["configMap"]["name"], self.configmap["metadata"]["name"])
        self.assertEqual(volumes["tls"]["secret"]["secretName"], "placementd-tls")
        self.assertEqual(volumes["auth"]["secret"]["secretName"], "placementd-auth")

    def test_startup_probe_waits_for_the_cluster(self):
        probe = self.container["startupProbe"]
        window = probe["periodSeconds"] * probe["failureThreshold"]
        self.assertGreater(window, duration_s(flag(self.flags, "cluster_init_timeout")))
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            self.assertEqual(self.container[kind]["grpc"]["port"], 50051, kind)

    def test_entrypoint_takes_the_index_from_the_pod_name(self):
        result = self.run_entrypoint("placementd-12", "10.1.2.3")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split(),
                         ["--flagfile=/etc/placementd/placementd.flags", "--process_index=12",
                          "--peer_advertise_address=10.1.2.3:7000"])
        ipv6 = self.run_entrypoint("placementd-0", "fd00::7")
        self.assertIn("--peer_advertise_address=[fd00::7]:7000", ipv6.stdout.split())
        bad = self.run_entrypoint("placementd", "10.1.2.3")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("cannot take --process_index from pod name 'placementd'", bad.stderr)

    def test_configmap_and_entrypoint_form_a_cluster(self):
        """Two pods' worth of daemons on loopback: the ConfigMap's flagfile plus
        this machine's addresses, started by the StatefulSet's own entrypoint
        with POD_NAME and POD_IP (127.0.0.x: each "pod" has its own loopback
        address, so both can use the manifest's peer port)."""
        peer_port = int(flag(self.flags, "peer_listen").rsplit(":", 1)[1])
        hosts = [f"127.0.{random.randint(1, 254)}.{10 + i}" for i in range(2)]
        for host in hosts:
            with socket.socket() as s:
                try:
                    s.bind((host, peer_port))
                except OSError as e:
                    self.skipTest(f"cannot bind {host}:{peer_port} here: {e}")
        script = self.script().replace("/opt/placement/bin/placementd",
                                       os.environ["PLACEMENTD_BIN"])
        work = tempfile.mkdtemp(prefix="placement-sts-")
        self.addCleanup(shutil.rmtree, work, True)
        nodes = []
        for i, host in enumerate(hosts):
            flags_path = os.path.join(work, f"pod{i}.flags")
            ready = os.path.join(work, f"ready{i}")
            with open(flags_path, "w") as f:
                # Later lines win: this machine's addresses and sizes.
                f.write(self.flags + "\n" + "\n".join([
                    "--listen=127.0.0.1:0", f"--peer_listen={host}:{peer_port}",
                    f"--coordinator={hosts[0]}:{peer_port}", "--num_processes=2",
                    "--metrics_listen=127.0.0.1:0", "--backend=cpu", "--cpu_devices=2",
                    "--cpu_device_memory=67108864", "--cluster_init_timeout=60s",
                    "--drain_timeout=5s", f"--ready_file={ready}"]) + "\n")
            argv = ["/bin/sh", "-c", script, *self.container["command"][3:],
                    f"--flagfile={flags_path}"]
            node = ClusterNode(argv, ready, env={"POD_NAME": f"placementd-{i}", "POD_IP": host})
            self.addCleanup(node.close)
            nodes.append(node)
        for i, node in enumerate(nodes):
            fields = ready_fields(node.wait_ready())
            self.assertEqual(fields["peer"], f"{hosts[i]}:{peer_port}")
            self.assertIn(f"joining as process {i} of 2", node.stderr())
            self.assertIn("cluster: formed", node.stderr())
        for node in nodes:
            self.assertEqual(node.stop(), 0, node.stderr())


class SystemdClusterFlagfileTest(unittest.TestCase):
    """deploy/systemd/placementd-cluster.flags: two nodes' worth of daemons
    started with it form a cluster, and its start-up wait fits the unit's."""

    @classmethod
    def setUpClass(cls):
        cls.flags = read("deploy", "systemd", "placementd-cluster.flags")

    def test_init_timeout_fits_the_units_start_timeout(self):
        unit = read("deploy", "systemd", "placementd.service")
        start_sec = int(re.search(r"^TimeoutStartSec=(\d+)s$", unit, re.M).group(1))
        self.assertLess(duration_s(flag(self.flags, "cluster_init_timeout")), start_sec)
        # The same file on every node; it names the cluster flags.
        for name in ("process_index", "num_processes", "coordinator", "peer_listen",
                     "heartbeat_interval", "heartbeat_misses", "tls_cert", "tls_client_ca",
                     "auth_file"):
            self.assertIsNotNone(flag(self.flags, name), name)

    def test_two_nodes_form_a_cluster(self):
        work = tempfile.mkdtemp(prefix="placement-systemd-")
        self.addCleanup(shutil.rmtree, work, True)
        ports = [free_port() for _ in range(2)]
        nodes = []
        for i in range(2):
            ready = os.path.join(work, f"ready{i}")
            # This machine's addresses and paths; the TLS files of a real node
            # do not exist here, so plaintext on loopback.
            flagfile = os.path.join(REPO, "deploy", "systemd", "placementd-cluster.flags")
            argv = [os.environ["PLACEMENTD_BIN"], f"--flagfile={flagfile}",
                    "--listen=127.0.0.1:0", f"--peer_listen=127.0.0.1:{ports[i]}",
                    f"--coordinator=127.0.0.1:{ports[0]}", "--num_processes=2",
                    f"--process_index={i}", "--metrics_listen=127.0.0.1:0", "--backend=cpu",
                    "--cpu_devices=2", "--cpu_device_memory=67108864", "--tls_cert=",
                    "--tls_key=", "--tls_client_ca=", "--auth_file=", "--drain_timeout=5s",
                    f"--ready_file={ready}"]
            node = ClusterNode(argv, ready)
            self.addCleanup(node.close)
            nodes.append(node)
        for i, node in enumerate(nodes):
            fields = ready_fields(node.wait_ready())
            self.assertEqual(fields["peer"], f"127.0.0.1:{ports[i]}")
            self.assertIn(f"joining as process {i} of 2", node.stderr())
        for node in nodes:
            self.assertEqual(node.stop(), 0, node.stderr())


if __name__ == "__main__":
    unittest.main(verbosity=2)
