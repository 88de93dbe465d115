"""The deploy files agree with placementd and with each other: the example
flagfile and the Kubernetes ConfigMap's flagfile start a real daemon, and
every supervisor's grace period before SIGKILL covers the drain it gives."""
import os
import re
import tempfile
import unittest

from ops_testing import REPO, Daemon

SHUTDOWN_SLACK_S = 2  # after the drain: server shutdown and the metrics exposer


def read(*parts):
    with open(os.path.join(REPO, *parts)) as f:
        return f.read()


def seconds(flag_text):
    m = re.search(r"^\s*--drain_timeout=(\d+)s\s*$", flag_text, re.M)
    assert m, "no --drain_timeout=<N>s"
    return int(m.group(1))


def configmap_flags():
    text = read("deploy", "kubernetes", "configmap.yaml")
    block = text.split("placementd.flags: |\n", 1)[1]
    return "\n".join(line[4:] for line in block.splitlines() if line.startswith("    "))


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

    def test_configmap_flagfile_starts_the_daemon(self):
        with self.start_with_flagfile(configmap_flags()) as daemon:
            self.assertRegex(daemon.address, r"^127\.0\.0\.1:\d+$")

    def test_grace_periods_cover_the_drain(self):
        unit = read("deploy", "systemd", "placementd.service")
        stop_sec = int(re.search(r"^TimeoutStopSec=(\d+)s$", unit, re.M).group(1))
        self.assertGreaterEqual(stop_sec, seconds(read("deploy", "placementd.flags")) +
                                SHUTDOWN_SLACK_S)
        daemonset = read("deploy", "kubernetes", "daemonset.yaml")
        grace = int(re.search(r"terminationGracePeriodSeconds: (\d+)", daemonset).group(1))
        self.assertGreaterEqual(grace, seconds(configmap_flags()) + SHUTDOWN_SLACK_S)
        # deploy.md's table says the same numbers.
        deploy_md = read("docs", "deploy.md")
        self.assertIn(f"`TimeoutStopSec={stop_sec}s`", deploy_md)
        self.assertIn(f"`terminationGracePeriodSeconds: {grace}`", deploy_md)
        # The image: see container_test.DockerfileTest.test_stop_grace_covers_the_drain.


if __name__ == "__main__":
    unittest.main(verbosity=2)
