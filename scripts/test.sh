#!/usr/bin/env bash
# Builds placementd and runs the whole test suite (ctest) on a fresh Debian 12
# machine: installs missing packages, makes a Python venv for the tests that
# use outside gRPC clients, configures with Ninja, builds, runs ctest.
#   bash scripts/test.sh            # BUILD_DIR=build, BUILD_TYPE=Release
# The libraries compile in batches of files (unity build; PLACEMENT_UNITY=OFF
# for one file at a time, as an edit-compile loop wants).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
build_type=${BUILD_TYPE:-Release}
bash scripts/install_deps.sh
mkdir -p "$build_dir"
python=$(bash scripts/python_env.sh "$build_dir")
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" \
  -DPLACEMENT_PYTHON="$python" -DPLACEMENT_UNITY="${PLACEMENT_UNITY:-ON}" ${CMAKE_ARGS:-}
cmake --build "$build_dir"
ctest --test-dir "$build_dir" --output-on-failure -j "${CTEST_JOBS:-2}" ${CTEST_ARGS:-}
