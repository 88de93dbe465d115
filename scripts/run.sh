#!/usr/bin/env bash
# Builds placementd (installing missing packages) and starts it with its
# embedded defaults: 127.0.0.1:50051, CUDA when a GPU is present, otherwise 8
# CPU virtual devices. Extra arguments go to placementd.
#   bash scripts/run.sh [--listen=0.0.0.0:50051] [--metrics_listen=127.0.0.1:9464]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
bash scripts/install_deps.sh
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPLACEMENT_UNITY="${PLACEMENT_UNITY:-ON}" >/dev/null
cmake --build "$build_dir" --target placementd placectl
exec "$build_dir/bin/placementd" "$@"
