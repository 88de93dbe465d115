"""The docs point only inside the repository, and docs/seeds.md states what
the daemon does: its batch-size table is what GetBatchSizeRecommendation
returns (asked with the real grpcurl), its messages what ValidateBatchSize
says."""
import glob
import json
import os
import re
import unittest

import ops_testing
from ops_testing import REPO, Daemon, run_grpcurl


def markdown_files():
    files = [os.path.join(REPO, "README.md")]
    files += glob.glob(os.path.join(REPO, "docs", "**", "*.md"), recursive=True)
    return files


class DocsTest(unittest.TestCase):
    def test_links_and_file_references_stay_inside_the_repository(self):
        for path in markdown_files():
            with open(path) as f:
                text = f.read()
            where = os.path.relpath(path, REPO)
            self.assertNotIn("SEED_BEHAVIOUR", text, where)
            self.assertNotIn("/work/", text, where)
            for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
                if re.match(r"[a-z]+://", target):
                    continue
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
                self.assertTrue(os.path.exists(resolved), f"{where}: link to missing {target}")
            # `path/like/this.ext` or `dir/` in backticks, rooted at the repository.
            for ref in re.findall(r"`((?:docs|server|client|common|proto|tests|tools|deploy|"
                                  r"scripts|bench|examples|cmake)/[\w./-]*)`", text):
                ref = ref.rstrip(".")
                if "*" in ref or ref.endswith("/N"):
                    continue
                self.assertTrue(os.path.exists(os.path.join(REPO, ref)), f"{where}: `{ref}`")


class SeedsDocTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        ops_testing.grpcurl_binary()
        cls.daemon = Daemon()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()

    def call(self, method, request):
        result = run_grpcurl("-plaintext", "-d", json.dumps(request), self.daemon.address,
                             "placement.v1.DeviceService/" + method)
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)

    def test_batch_size_table_is_what_the_daemon_returns(self):
        with open(os.path.join(REPO, "docs", "seeds.md")) as f:
            text = f.read()
        rows = re.findall(r"^\| ([A-Z0-9_]+) \| (\d+) \| (\d+) \| (\d+) \| (.+) \|$", text, re.M)
        self.assertEqual(len(rows), 8)
        for name, low, optimal, critical, notes in rows:
            rec = self.call("GetBatchSizeRecommendation",
                            {"hardware_name": name.lower()})["recommendation"]
            self.assertEqual((rec["min_batch_size"], rec["optimal_batch_size"],
                              rec["critical_batch_size"], rec["notes"]),
                             (low, optimal, critical, notes), name)
            self.assertNotIn("max_memory_batch_size", rec)
        # H200 and B200 have no row: they get UNKNOWN's.
        rec = self.call("GetBatchSizeRecommendation", {"hardware_name": "h200"})["recommendation"]
        self.assertEqual(rec["optimal_batch_size"], "128")

    def test_validate_messages_are_the_documented_ones(self):
        with open(os.path.join(REPO, "docs", "seeds.md")) as f:
            text = f.read()
        templates = re.findall(r'"(Batch size \{b\}[^"]*)"', text)
        self.assertEqual(len(templates), 4)
        cases = [(8, True, "tpu_v5e"), (100, True, "tpu_v5e"), (512, True, "tpu_v5e"),
                 (100, False, "tpu_v5e")]
        table = {"min": 64, "critical": 240, "hw": "tpu_v5e"}
        for (b, warn, hw), template in zip(cases, templates):
            got = self.call("ValidateBatchSize",
                            {"batch_size": b, "warn_suboptimal": warn, "hardware_name": hw})
            expected = template.replace("{b}", str(b))
            for key, value in table.items():
                expected = expected.replace("{" + key + "}", str(value))
            self.assertEqual(got["message"], expected)


if __name__ == "__main__":
    unittest.main(verbosity=2)
