"""python/examples/ (the seeds' usage examples) run against the session's
daemon, each in its own interpreter, named by $PLACEMENT_TARGET; the
tensors they leave are freed when they exit (Client.close at exit)."""
import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.environ.get("PLACEMENT_SOURCE_DIR",
                                       os.path.join(os.path.dirname(__file__), "../../..")),
                        "python", "examples")

EXPECTED = {
    "device_placement.py": ["Detected hardware: HardwareType.CPU", "Available devices: 8",
                            "H100 critical batch: 298",
                            "Valid: True, Message: Batch size 256 is optimal for cpu.",
                            "Prefetched batches processed: 100, in order: True",
                            "Replicated layer2 on 2 devices", "Number of devices: 8",
                            "  Device 7: cpu (cpu)"],
    "device_mesh.py": ["Available devices: 8", "Total devices: 4",
                       "Axes: {'data': 2, 'model': 2}", "Same mesh from dict and list: True"],
    "data_parallel.py": ["Mean gradient w: [[3.5 3.5 3.5 3.5]]",
                         "Learned w: [ 2.  -3.   0.5] (true [ 2.  -3.   0.5])"],
    "loadax_placement.py": ["Round trip equal: True",
                            "Replicated mask on 8 devices, first shard equal: True",
                            "Error: arrays[0] 'x': ([10,3]) cannot be sharded across 8 devices."],
}


def test_every_example_is_covered():
    assert sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(client, name):
    env = dict(os.environ, PLACEMENT_TARGET=client.target)
    out = subprocess.run([sys.executable, os.path.join(EXAMPLES, name)], env=env,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for line in EXPECTED[name]:
        assert line in lines, f"{line!r} not in the output of {name}:\n{out.stdout}"
