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
trap 'kill ${daemon_pid:-} ${flags_pid:-} 2>/dev/null || true; rm -rf "$work"' EXIT
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
# An installable service: the unit (its paths rewritten to this prefix), the flagfile, the
# system user and the configuration directories.
daemon_files=$(cd "$work/daemon" && find . -type f | sort | tr '\n' ' ')
expected="./bin/placectl ./bin/placementd ./etc/placementd/placementd.flags \
./lib/systemd/system/placementd.service ./lib/sysusers.d/placementd.conf \
./lib/tmpfiles.d/placementd.conf "
if [[ "$daemon_files" != "$expected" ]]; then
  echo "the daemon component ships: $daemon_files" >&2
  echo "expected:                   $expected" >&2
  exit 1
fi
unit="$work/daemon/lib/systemd/system/placementd.service"
grep -qx "ExecStart=$work/daemon/bin/placementd --flagfile=$work/daemon/etc/placementd/placementd.flags" "$unit"
grep -qx "User=placementd" "$unit"
grep -q '^u placementd ' "$work/daemon/lib/sysusers.d/placementd.conf"
grep -q '^d /etc/placementd/tls ' "$work/daemon/lib/tmpfiles.d/placementd.conf"
# The installed flagfile starts the installed daemon (this machine's paths and port).
"$work/daemon/bin/placementd" --flagfile="$work/daemon/etc/placementd/placementd.flags" \
  --listen=127.0.0.1:0 --backend=cpu --metrics_listen= --cpu_device_memory=67108864 \
  --ready_file="$work/flags-ready" 2>"$work/flags.log" &
flags_pid=$!
for _ in $(seq 1 300); do [[ -s "$work/flags-ready" ]] && break; sleep 0.1; done
[[ -s "$work/flags-ready" ]] || { cat "$work/flags.log" >&2; exit 1; }
kill -TERM $flags_pid
wait $flags_pid
if command -v systemd-analyze >/dev/null; then
  # Every directive known, ExecStart= an executable, the dependencies resolvable.
  SYSTEMD_LOG_LEVEL=err systemd-analyze verify --man=no "$unit"
  systemd-sysusers --dry-run "$work/daemon/lib/sysusers.d/placementd.conf" >/dev/null
fi
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
