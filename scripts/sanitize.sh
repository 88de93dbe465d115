#!/usr/bin/env bash
# Sanitizer builds of the tests that exercise memory ownership and
# concurrency, sized for CI on 2 cores:
#   address: ASan + UBSan (build-asan), thread: TSan (build-tsan).
#   bash scripts/sanitize.sh [address|thread|both]
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-both}
run() {
  local kind=$1 dir=$2 regex=$3
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
    -DPLACEMENT_SANITIZER="$kind" -DPLACEMENT_WITH_CUDA=OFF -DPLACEMENT_BUILD_BENCH=OFF >/dev/null
  # Build only what the selected tests need.
  local targets
  targets=$(ctest --test-dir "$dir" -N -R "$regex" | awk '/Test +#/ {print $3}' | sort -u)
  cmake --build "$dir" --target placementd placectl $targets
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ctest --test-dir "$dir" --output-on-failure -j 2 -R "$regex"
}
asan_tests=${ASAN_TESTS:-'^(mesh_test|sharding_test|region_test|cpu_backend_test|call_gate_test|metrics_test|daemon_test|tensor_.*|upload_.*|download_.*|reshard.*|collective_.*|local_engine.*|prefetch.*)$'}
tsan_tests=${TSAN_TESTS:-'^(cpu_backend_test|call_gate_test|tensor_store_test|local_engine.*|prefetch_pipeline.*)$'}
if [[ $which == address || $which == both ]]; then run address build-asan "$asan_tests"; fi
if [[ $which == thread || $which == both ]]; then run thread build-tsan "$tsan_tests"; fi
