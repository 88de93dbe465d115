"""placementd's command line as an operator meets it: --help lists exactly the
flags docs/operations.md documents, with the same defaults, and exits 0;
--version reports the build it came from; bad flags exit as documented."""
import os
import re
import subprocess
import unittest

from ops_testing import REPO

PLACEMENTD = os.environ.get("PLACEMENTD_BIN", "placementd")


def run(*args):
    return subprocess.run([PLACEMENTD, *args], capture_output=True, text=True, timeout=60)


def documented_flags():
    """flag -> default from the flags table of docs/operations.md."""
    with open(os.path.join(REPO, "docs", "operations.md")) as f:
        section = f.read().split("## Flags", 1)[1].split("\n## ", 1)[0]
    flags = {}
    for row in section.splitlines():
        m = re.match(r"\| `--([a-z_]+)` \| ([^|]+) \|", row)
        if m:
            default = m.group(2).strip()
            flags[m.group(1)] = "" if default == "empty" else default.strip("`")
    return flags


class CommandLineTest(unittest.TestCase):
    def test_help_lists_the_documented_flags_and_exits_0(self):
        for spelling in ["--help", "-h", "--helpfull"]:
            result = run(spelling)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("placementd: serves this machine's accelerators over gRPC.", result.stdout)
        listed = dict(re.findall(r"^  --([a-z_]+) \(default: (.*)\)$", run("--help").stdout, re.M))
        listed = {k: "" if v == '""' else v for k, v in listed.items()}
        self.assertEqual(listed, documented_flags())
        for extra in ["--flagfile=FILE", "--help, -h", "--version"]:
            self.assertIn("\n  " + extra + "\n", run("--help").stdout)

    def test_help_wins_over_other_flags_and_starts_nothing(self):
        result = run("--listen=not-an-address", "--help")
        self.assertEqual(result.returncode, 0)
        self.assertEqual(result.stderr, "")

    def test_version_reports_the_build(self):
        result = run("--version")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        m = re.fullmatch(r"placementd (\d+\.\d+\.\d+) \(git (\S+)\)", lines[0])
        self.assertIsNotNone(m, lines[0])
        head = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True,
                              text=True)
        if head.returncode == 0:  # a checkout: describe names the commit it was built from
            self.assertRegex(m.group(2), r"(^|-g)[0-9a-f]{7,}(-dirty)?$")
            short = re.search(r"([0-9a-f]{7,})(-dirty)?$", m.group(2)).group(1)
            self.assertTrue(head.stdout.startswith(short), (m.group(2), head.stdout))
        build_type = os.environ.get("PLACEMENT_BUILD_TYPE", "")
        self.assertTrue(lines[1].startswith(f"build: {build_type}, assertions "), lines[1])
        self.assertEqual("assertions off" in lines[1], build_type in ("Release", "MinSizeRel"))
        self.assertRegex(lines[2], r"^compiler: (gcc|clang) \d+\.\d+\.\d+")
        cuda = os.environ.get("PLACEMENT_CUDA", "")
        self.assertEqual("cuda" in lines[3], cuda == "ON", lines[3])
        self.assertEqual(lines[3].endswith("; CUDA off"), cuda == "OFF", lines[3])
        self.assertRegex(lines[4], r"^libraries: gRPC 1\.\d+\.\d+, protobuf \d+\.\d+\.\d+$")

    def test_bad_flags_exit_as_documented(self):
        invalid = run("--cpu_devices=0", "--listen=127.0.0.1:0", "--backend=cpu")
        self.assertEqual(invalid.returncode, 2)
        self.assertIn("cpu_devices must be in [1, 1024], got 0", invalid.stderr)
        v6 = run("--metrics_listen=[::1]:0", "--listen=127.0.0.1:0", "--backend=cpu")
        self.assertEqual(v6.returncode, 2)
        self.assertIn("--metrics_listen='[::1]:0': IPv6 is not supported", v6.stderr)
        unknown = run("--nope")
        self.assertEqual(unknown.returncode, 1)
        self.assertIn("Unknown command line flag 'nope'", unknown.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
