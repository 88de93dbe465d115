#!/usr/bin/env bash
# Installs the build tree into a temp prefix, checks that exactly the client
# was installed (library, public headers, CMake package; no generated or gRPC
# header in them), builds tests/install/consumer against it with
# find_package(placement), and runs it against a real daemon. Also checks
# that the `daemon` component holds placementd and placectl.
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
libdir='lib(/x86_64-linux-gnu)?'
unexpected=$(cd "$work/prefix" && find . -type f -o -type l | grep -v -E \
  -e '^\./include/placement/client/[a-z_]+\.h$' \
  -e "^\\./${libdir}/libplacement_client\\.a$" \
  -e "^\\./${libdir}/cmake/placement/placement(Config|ConfigVersion|Targets|Targets-[a-z]+)\\.cmake$" \
  || true)
if [[ -n "$unexpected" ]]; then
  echo "cmake --install shipped more than the client:" >&2
  echo "$unexpected" >&2
  exit 1
fi
if grep -rnE '#include [<"](placement/v1/|grpcpp/|grpc/|google/protobuf/)' "$work/prefix/include"; then
  echo "a public header includes a generated or gRPC header" >&2
  exit 1
fi
cmake --install "$build_dir" --prefix "$work/daemon" --component daemon >/dev/null
test -x "$work/daemon/bin/placementd"
test -x "$work/daemon/bin/placectl"
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
