"""Build hook: compiles proto/placement/v1/*.proto with grpcio-tools into
placement/v1/ (messages, gRPC stubs and .pyi type stubs) in the build tree,
and pins grpcio / protobuf to what that generated code needs.

The .proto files are found in $PLACEMENT_PROTO_DIR, else ../proto (this
package inside the placementd checkout), else ./proto (an sdist).
"""
import os
import re
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def proto_root() -> Path:
    candidates = [os.environ.get("PLACEMENT_PROTO_DIR"), HERE.parent / "proto", HERE / "proto"]
    for c in candidates:
        if c and (Path(c) / "placement" / "v1").is_dir():
            return Path(c)
    sys.exit("placement: cannot find proto/placement/v1 (set PLACEMENT_PROTO_DIR)")


def generate(out_dir: Path) -> str:
    """Runs protoc into out_dir/placement/v1; returns the gencode protobuf version."""
    from grpc_tools import protoc  # build requirement
    import grpc_tools

    root = proto_root()
    protos = sorted(str(p) for p in (root / "placement" / "v1").glob("*.proto"))
    include = str(Path(grpc_tools.__file__).parent / "_proto")
    out_dir.mkdir(parents=True, exist_ok=True)
    args = ["protoc", f"-I{root}", f"-I{include}", f"--python_out={out_dir}",
            f"--grpc_python_out={out_dir}", f"--pyi_out={out_dir}", *protos]
    if protoc.main(args) != 0:
        sys.exit("placement: protoc failed on " + " ".join(protos))
    pkg = out_dir / "placement" / "v1"
    (pkg / "__init__.py").write_text('"""Generated from proto/placement/v1 at build time."""\n')
    header = (pkg / "types_pb2.py").read_text()
    found = re.search(r"Protobuf Python Version: (\d+)\.(\d+)\.(\d+)", header)
    return ".".join(found.groups()) if found else ""


def requirements() -> list:
    """grpcio >= the grpcio-tools that generated the stubs (they check it at
    import); protobuf >= the gencode version and of the same major (the
    runtime check)."""
    reqs = ["numpy>=1.22"]
    try:
        import grpc_tools
        from importlib.metadata import version
        tools = version("grpcio-tools")
    except Exception:  # metadata only (e.g. egg_info without build deps)
        return reqs + ["grpcio", "protobuf"]
    reqs.append(f"grpcio>={tools}")
    gen = _gencode_version()
    if gen:
        major = int(gen.split(".")[0])
        reqs.append(f"protobuf>={gen},<{major + 1}")
    else:
        reqs.append("protobuf")
    return reqs


def _gencode_version() -> str:
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        return generate(Path(tmp))


class BuildWithProtos(build_py):
    def run(self):
        super().run()
        generate(Path(self.build_lib))


setup(cmdclass={"build_py": BuildWithProtos}, install_requires=requirements())
