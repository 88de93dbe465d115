"""The Python client's dtype, hardware-type and reduce-op tables agree with
the one table of each in common/ (dumped by placement_tables_dump, built from
common/dtype.cc, hardware.cc, reduce_op.cc) and with the wire enums."""
import json
import os
import subprocess

import ml_dtypes
import numpy as np

from placement import HardwareType, _dtypes, collectives
from placement.v1 import types_pb2


def tables():
    out = subprocess.run([os.environ["PLACEMENT_TABLES_BIN"]], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return json.loads(out)


def numpy_dtype(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else \
        np.dtype(np.bool_) if name == "bool_" else np.dtype(name)


def test_dtypes_match_common_and_the_wire():
    dtypes = tables()["dtypes"]
    assert len(dtypes) == 10
    for d in dtypes:
        dt = numpy_dtype(d["numpy"])
        assert _dtypes.to_proto(dt) == d["value"], d
        assert _dtypes.from_proto(d["value"]) == dt, d
        assert dt.itemsize == d["size"], d
        assert _dtypes.describe(d["value"], [2, 3]) == f"{d['name']}[2,3]"
        assert types_pb2.DType.Name(d["value"]) == "DTYPE_" + d["name"].upper()
    # Nothing more in Python than in common/.
    assert set(_dtypes._TO_PROTO.values()) == {d["value"] for d in dtypes}


def test_hardware_types_match_common_and_the_wire():
    hardware = tables()["hardware_types"]
    assert {h["name"] for h in hardware} == {h.value for h in HardwareType}
    for h in hardware:
        assert types_pb2.HardwareType.Name(h["value"]) == "HARDWARE_TYPE_" + h["name"].upper()


def test_reduce_ops_match_common_and_the_wire():
    ops = tables()["reduce_ops"]
    assert [o["name"] for o in ops] == list(collectives.REDUCE_OPS)
    for o in ops:
        assert types_pb2.ReduceOp.Name(o["value"]) == "REDUCE_OP_" + o["name"].upper()
