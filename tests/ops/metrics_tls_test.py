"""The metrics port over HTTPS: off loopback, a daemon with --tls_cert serves
/metrics and /healthz with that certificate (MetricsTlsFront, since Debian's
civetweb crashes on HTTPS with OpenSSL 3). A real HTTPS client (Python's
ssl + urllib) that trusts the CA gets the same exposition text the HTTP port
serves, parsed by prometheus_client; one that trusts another CA, or speaks
plaintext, is refused and the daemon keeps serving. On loopback the port
stays plain HTTP; off loopback without a certificate it needs
--allow_insecure. Certificates are made here with the `openssl` command."""
import http.client
import os
import re
import socket
import ssl
import subprocess
import tempfile
import unittest
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from ops_testing import Daemon, make_pki, openssl


def port_of(url):
    return int(re.search(r":(\d+)/metrics$", url).group(1))


class MetricsTlsTest(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory(prefix="placement-metrics-tls-")
        self.pki = self._dir.name
        make_pki(self.pki)
        self.tls_flags = ("--tls_cert=" + os.path.join(self.pki, "server.pem"),
                          "--tls_key=" + os.path.join(self.pki, "server.key"))

    def tearDown(self):
        self._dir.cleanup()

    def context(self, ca):
        return ssl.create_default_context(cafile=os.path.join(self.pki, ca + ".pem"))

    def get(self, url, ca="ca"):
        with urllib.request.urlopen(url, timeout=10, context=self.context(ca)) as response:
            return response.status, response.headers.get("Content-Type"), response.read().decode()

    def test_off_loopback_serves_https_with_the_daemon_certificate(self):
        with Daemon(*self.tls_flags, "--metrics_listen=0.0.0.0:0") as daemon:
            self.assertRegex(daemon.metrics_url, r"^https://0\.0\.0\.0:\d+/metrics$")
            self.assertIn("metrics on https://0.0.0.0:", daemon.stderr())
            base = f"https://127.0.0.1:{port_of(daemon.metrics_url)}"

            status, content_type, body = self.get(base + "/metrics")
            self.assertEqual(status, 200)
            self.assertTrue(content_type.startswith("text/plain; version=0.0.4"), content_type)
            families = {f.name: f for f in text_string_to_metric_families(body)}
            self.assertEqual(families["placementd_up"].samples[0].value, 1.0)
            self.assertIn("placementd_device_memory_limit_bytes", families)
            # With TLS on, the gRPC port's reload counters exist at 0.
            for name in ("placementd_tls_reloads", "placementd_tls_reload_failures"):
                self.assertEqual(families[name].samples[0].value, 0.0, name)
            # By name too: the certificate says DNS:localhost.
            self.assertEqual(self.get(
                f"https://localhost:{port_of(daemon.metrics_url)}/healthz"), (
                    200, "text/plain; charset=utf-8", "ok\n"))
            with self.assertRaises(urllib.error.HTTPError) as missing:
                self.get(base + "/nope")
            self.assertEqual(missing.exception.code, 404)

            # A client that trusts another CA refuses the daemon; a plaintext
            # client gets no HTTP answer. Neither harms the daemon.
            with self.assertRaises(urllib.error.URLError) as distrust:
                self.get(base + "/metrics", ca="other_ca")
            self.assertIsInstance(distrust.exception.reason, ssl.SSLCertVerificationError)
            plain = http.client.HTTPConnection("127.0.0.1", port_of(daemon.metrics_url),
                                               timeout=10)
            with self.assertRaises((http.client.HTTPException, ConnectionError)):
                plain.request("GET", "/metrics")
                plain.getresponse()
            plain.close()
            for _ in range(3):
                self.assertEqual(self.get(base + "/metrics")[0], 200)
            # Clients that connect and send nothing hold a connection each,
            # not the port: scrapes still get through, and stopping the
            # daemon does not wait for them.
            stalled = [socket.create_connection(("127.0.0.1", port_of(daemon.metrics_url)))
                       for _ in range(3)]
            self.assertEqual(self.get(base + "/healthz")[0], 200)
            self.assertIsNone(daemon.proc.poll())
            self.assertEqual(daemon.stop(), 0)
            for s in stalled:
                s.close()

    def test_a_replaced_certificate_is_served_on_the_next_connection(self):
        # A second server certificate, from other_ca, for the same names.
        openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", "next.key", "-out", "next.csr", "-subj", "/CN=placementd",
                cwd=self.pki)
        openssl("x509", "-req", "-in", "next.csr", "-CA", "other_ca.pem", "-CAkey",
                "other_ca.key", "-CAcreateserial", "-days", "2", "-extfile", "server.ext",
                "-out", "next.pem", cwd=self.pki)
        with Daemon(*self.tls_flags, "--metrics_listen=0.0.0.0:0") as daemon:
            url = f"https://127.0.0.1:{port_of(daemon.metrics_url)}/healthz"
            self.assertEqual(self.get(url)[0], 200)
            # Rotated in place, as a Kubernetes Secret update does (new files
            # renamed over the old ones).
            for name in ("key", "pem"):
                os.replace(os.path.join(self.pki, "next." + name),
                           os.path.join(self.pki, "server." + name))
            self.assertEqual(self.get(url, ca="other_ca")[0], 200)
            with self.assertRaises(urllib.error.URLError):
                self.get(url, ca="ca")
            self.assertIn("metrics TLS: reloaded the certificate", daemon.stderr())
            # A file that does not parse keeps the last good certificate.
            with open(os.path.join(self.pki, "server.pem"), "w") as f:
                f.write("not a certificate\n")
            self.assertEqual(self.get(url, ca="other_ca")[0], 200)
            self.assertIn("keeping the previous certificate", daemon.stderr())
            self.assertEqual(daemon.stop(), 0)

    def test_loopback_stays_plain_http_with_tls_on(self):
        with Daemon(*self.tls_flags, "--metrics_listen=127.0.0.1:0") as daemon:
            self.assertRegex(daemon.metrics_url, r"^http://127\.0\.0\.1:\d+/metrics$")
            with urllib.request.urlopen(daemon.metrics_url, timeout=10) as response:
                self.assertEqual(response.status, 200)
                self.assertIn("placementd_up 1", response.read().decode())

    def test_off_loopback_without_a_certificate_needs_allow_insecure(self):
        with self.assertRaises(AssertionError) as refused:
            Daemon("--metrics_listen=0.0.0.0:0")
        self.assertIn("give --tls_cert/--tls_key (HTTPS), or pass --allow_insecure",
                      str(refused.exception))


if __name__ == "__main__":
    unittest.main()
