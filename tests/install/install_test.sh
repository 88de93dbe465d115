#!/usr/bin/env bash
# Installs the build tree into a temp prefix, builds tests/install/consumer
# against it with find_package(placement), and runs it against a real daemon.
set -euo pipefail
build_dir=$1
source_dir=$2
placementd=$3
work=$(mktemp -d)
trap 'kill $daemon_pid 2>/dev/null || true; rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/include/placement/client/client.h"
test -f "$work/prefix/lib/cmake/placement/placementConfig.cmake" || \
  test -f "$work/prefix/lib/x86_64-linux-gnu/cmake/placement/placementConfig.cmake"
cmake -S "$source_dir/tests/install/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$placementd" --listen=127.0.0.1:0 --backend=cpu --cpu_devices=3 --ready_file="$work/ready" 2>"$work/daemon.log" &
daemon_pid=$!
for _ in $(seq 1 300); do [[ -s "$work/ready" ]] && break; sleep 0.1; done
out=$("$work/consumer/consumer" "$(cat "$work/ready")")
echo "$out"
[[ "$out" == "devices=3 hardware=cpu" ]]
kill -TERM $daemon_pid
wait $daemon_pid
