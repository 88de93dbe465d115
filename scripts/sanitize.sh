#!/usr/bin/env bash
# Sanitizer builds of the tests that exercise memory ownership and
# concurrency, sized for CI on 2 cores:
#   address: ASan + UBSan (build-asan), thread: TSan (build-tsan).
#   bash scripts/sanitize.sh [address|thread|both]
# CI runs `address`. TSan needs every library that synchronises our threads
# to be instrumented; Debian's Abseil and gRPC are not, so TSan reports their
# mutex hand-offs as races. `thread` is kept for machines with instrumented
# builds of those libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-address}
run() {
  local kind=$1 dir=$2 regex=$3
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
    -DPLACEMENT_SANITIZER="$kind" -DPLACEMENT_WITH_CUDA=OFF -DPLACEMENT_BUILD_BENCH=OFF \
    -DPLACEMENT_UNITY="${PLACEMENT_UNITY:-ON}" >/dev/null
  # Build only what the selected tests need.
  # A test's executable is its name, or its name less a _<instance> suffix
  # (transport_conformance_test_gloo runs transport_conformance_test).
  local targets executables
  executables=$(ninja -C "$dir" -t targets all | sed -n 's|^bin/\([A-Za-z0-9_]*\): .*|\1|p')
  targets=$(ctest --test-dir "$dir" -N -R "$regex" | awk '/Test +#/ {print $3}' |
    while read -r t; do
      if grep -qFx "$t" <<<"$executables"; then echo "$t"; else echo "${t%_*}"; fi
    done | sort -u)
  # placementd: the integration tests start it (none of them runs placectl).
  cmake --build "$dir" --target placementd $targets
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    ctest --test-dir "$dir" --output-on-failure -j 2 -R "$regex"
}
asan_tests=${ASAN_TESTS:-'^(mesh_test|sharding_test|region_test|cpu_backend_test|budgeted_backend_test|block_cache_test|platform_selection_test|call_gate_test|metrics_test|tensor_store_test|upload_session_test|download_plan_test|resharder_test|assembler_test|placement_rules_test|chunk_runs_test|reduce_kernels_test|local_engine_test|collective_plan_test|plan_cache_test|collective_service_core_test|prefetch_pipeline_test|prefetch_manager_test|daemon_test|tensor_service_test|collective_service_test|prefetch_test|region_bounds_test|region_registry_test|pinned_host_ranges_test|shared_region_test|prefetch_region_test|box_cursor_test|cluster_engine_test|cluster_engine_call_order_test|fan_out_test|transport_conformance_test_gloo|ticket_sequencer_test|wire_reduction_test|membership_test|barrier_table_test|kv_store_test|cluster_tensors_test|cluster_collectives_test|cluster_forfeit_test|cluster_process_local_test|cluster_read_after_call_test|session_manager_test|peer_client_test|coordinator_client_test|deadline_timer_test|fd_passing_listener_test|fd_token_table_test|process_exit_watcher_test|region_socket_test|shm_region_test|tls_rotation_test|export_registry_test|cpu_export_test|views_test|view_lifetime_test|prefetch_view_test|upload_reservations_test|inplace_upload_test|expiry_thread_test|writable_mappings_test|box_copy_test)$'}
tsan_tests=${TSAN_TESTS:-'^(cpu_backend_test|call_gate_test|tensor_store_test|local_engine_test|prefetch_pipeline_test)$'}
if [[ $which == address || $which == both ]]; then run address build-asan "$asan_tests"; fi
if [[ $which == thread || $which == both ]]; then run thread build-tsan "$tsan_tests"; fi
