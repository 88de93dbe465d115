#!/usr/bin/env bash
# The GPU check in one command (docs/gpu.md).
#
#   bash scripts/gpu_check.sh prepare   # on the build machine (no GPU needed)
#   bash scripts/gpu_check.sh run       # on a machine with an NVIDIA GPU
#
# prepare: builds the CUDA configuration (BUILD_DIR, default build; CUDA ON,
#   CMAKE_CUDA_ARCHITECTURES 90) and packs what `run` needs -- placementd,
#   placectl, every gpu-labelled test, the C++ integration suite, the cluster
#   tensor and collective tests, the GPU benchmarks, and the shared libraries
#   they load (../shared/tools/bundle-libs) -- into .gpu-bundle/bundle.tar.xz
#   (git-ignored; it must stay under 64 MiB to travel), with the commit.
# run: unpacks the bundle and runs, within about 8 minutes on one GPU:
#   1. every gpu-labelled test,
#   2. the integration suite against --backend=cuda daemons
#      (PLACEMENT_TEST_BACKEND=cuda: 8 logical devices of GPU 0),
#   3. compute-sanitizer --tool memcheck on the core GPU tests,
#   4. a 2-daemon cluster on the one GPU: the cluster tensor and collective
#      tests on --backend=cuda daemons,
#   5. the GPU benchmark rows, each against its baseline in the same run
#      (upload/download and region H2D/D2H against pinned cudaMemcpy, the
#      CUDA IPC view in parts against the reader's own device-to-device copy,
#      prefetch at compute = transfer and 2x, the NCCL collective part),
#   6. issue 24's CPU rows on a machine with a core per daemon (CPU
#      devices): the cluster all-reduce over 2 and 4 daemons against Gloo
#      direct, and the 1 KiB collective against a bare gRPC echo,
#   and writes the record docs/gpu-runs/YYYY-MM-DD-<short sha>.txt (into $OUT
#   when set, so a device call brings it back): `commit: <sha>`, the device
#   as the driver names it, each result, each figure, and a closing
#   `N passed, M failed`. Exit status 0 when nothing failed.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
bundle=.gpu-bundle

# --- what the run needs --------------------------------------------------------------------
# Entries are "binary [arguments]"; the conformance suites run their cuda
# instances (ctest's NAME_cuda).
gpu_tests=(cuda_backend_test nccl_engine_test nccl_transport_test gpu_daemon_test region_gpu_test
  tensor_gpu_test view_gpu_test "backend_conformance_test --gtest_filter=*/cuda" "daemon_conformance_test --gtest_filter=*/cuda")
cluster_tests=(cluster_tensors_test cluster_collectives_test)
benches=(tensor_transfer_bench prefetch_bench collective_bench cluster_bench device_latency_bench)
# memcheck: the tests that drive CUDA memory directly (daemons included).
memcheck_tests=(cuda_backend_test region_gpu_test tensor_gpu_test view_gpu_test)

prepare() {
  set -e
  local build_dir=${BUILD_DIR:-build}
  bash scripts/install_deps.sh
  local python
  python=$(bash scripts/python_env.sh "$build_dir")
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPLACEMENT_WITH_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DPLACEMENT_PYTHON="$python" -DPLACEMENT_UNITY="${PLACEMENT_UNITY:-ON}" \
    ${CMAKE_ARGS:-} >/dev/null
  # The C++ integration tests: ctest entries that are executables of ours.
  local executables integration
  executables=$(ninja -C "$build_dir" -t targets all | sed -n 's|^bin/\([A-Za-z0-9_]*\): .*|\1|p')
  integration=$(ctest --test-dir "$build_dir" -N -L integration | awk '/Test +#/ {print $3}' |
    grep -Fxf <(echo "$executables") | grep -v -Fx -e cluster_scale_test | sort -u)
  # linear_regression: the example linear_regression_example_test runs;
  # client_session_child: the killed client client_api_itest starts.
  local targets=(placementd placectl linear_regression client_session_child "${cluster_tests[@]}"
    "${benches[@]}")
  for t in "${gpu_tests[@]}"; do targets+=("${t%% *}"); done
  cmake --build "$build_dir" --target "${targets[@]}" $integration
  rm -rf "$bundle"
  local bins=()
  for t in "${targets[@]}" $integration; do
    [[ -x $build_dir/bin/$t ]] && bins+=("$build_dir/bin/$t")
  done
  ../shared/tools/bundle-libs -o "$bundle/stage" "${bins[@]}" >/dev/null
  printf '%s\n' $integration >"$bundle/stage/integration.txt"
  git rev-parse HEAD >"$bundle/stage/commit"
  git status --porcelain --untracked-files=no | grep -q . && echo dirty >>"$bundle/stage/commit"
  XZ_OPT='-6 -T2' tar -C "$bundle" -cJf "$bundle/bundle.tar.xz" stage
  rm -rf "$bundle/stage"
  local size
  size=$(stat -c %s "$bundle/bundle.tar.xz")
  echo "gpu_check: $bundle/bundle.tar.xz holds ${#bins[@]} executables, $((size >> 20)) MiB"
  if ((size >= 64 << 20)); then
    echo "gpu_check: the bundle is over 64 MiB and cannot travel" >&2
    exit 1
  fi
}

# --- on the GPU machine ------------------------------------------------------------------
passed=0
failed=0
record=""
note() { printf '%s\n' "$*" | tee -a "$record"; }

# result NAME LOGFILE STATUS [bench]: one line per test, from gtest's
# summary (a benchmark "ran" when it exited 0).
result() {
  local name=$1 log=$2 rc=$3 verdict
  local skipped
  skipped=$(grep -c '^\[  SKIPPED \]' "$log" 2>/dev/null)
  local ok
  ok=$(grep -oE '^\[  PASSED  \] [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -n 1)
  if [[ $rc == 0 && ${4:-} == bench ]]; then
    verdict="ran"
    passed=$((passed + 1))
  elif [[ $rc == 0 ]]; then
    verdict="passed (${ok:-0} passed, ${skipped:-0} skipped)"
    passed=$((passed + 1))
  else
    verdict="FAILED (exit $rc)"
    failed=$((failed + 1))
  fi
  note "  $name: $verdict"
  if [[ $rc != 0 ]]; then
    grep -E '^\[  FAILED  \]|Failure$|error' "$log" | head -n 8 | sed 's/^/      /' | tee -a "$record"
  fi
}

# run_tests TIMEOUT PARALLEL "BINARY [ARGS]"...: up to PARALLEL at once.
run_tests() {
  local timeout_s=$1 parallel=$2
  shift 2
  printf '%s\n' "$@" | xargs -P "$parallel" -d '\n' -I{} bash -c '
    set -f; spec=$1; name=${spec%% *}; args=${spec#"$name"}
    timeout "$2" "$3/$name" $args >"$4/$name.log" 2>&1; echo $? >"$4/$name.rc"' \
    _ {} "$timeout_s" "$bin" "$logs"
  for spec in "$@"; do
    local name=${spec%% *}
    result "$name" "$logs/$name.log" "$(cat "$logs/$name.rc" 2>/dev/null || echo 124)"
  done
}

run() {
  local started
  started=$(date +%s)
  [[ -f $bundle/bundle.tar.xz ]] || {
    echo "gpu_check: no $bundle/bundle.tar.xz; run 'bash scripts/gpu_check.sh prepare' first" >&2
    exit 2
  }
  local work=/tmp/gpu_check
  rm -rf "$work"
  mkdir -p "$work"
  # Python's tarfile reads xz wherever the xz tool is missing.
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$bundle/bundle.tar.xz" "$work"
  bin=$work/stage/bin
  logs=$work/logs
  mkdir -p "$logs"
  local nccl=""
  for d in /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu /usr/local/lib/python3*/dist-packages/nvidia/nccl/lib; do
    compgen -G "$d/libnccl.so*" >/dev/null && { nccl=$d; break; }
  done
  export LD_LIBRARY_PATH="$work/stage/lib${nccl:+:$nccl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PLACEMENTD_BIN=$bin/placementd PLACECTL_BIN=$bin/placectl
  export SESSION_CHILD_BIN=$bin/client_session_child  # as ctest sets it
  # The case tables the conformance tests read (the repository travels).
  export PLACEMENT_TEST_DATA_DIR=$PWD/tests/data
  local commit
  commit=$(head -n 1 "$work/stage/commit")
  local out_dir=${OUT:-docs/gpu-runs}
  mkdir -p "$out_dir"
  record="$out_dir/$(date -u +%Y-%m-%d)-${commit:0:7}.txt"
  : >"$record"
  note "# placementd GPU check (scripts/gpu_check.sh run)"
  note "commit: $commit$(sed -n 2p "$work/stage/commit" | sed 's/^/ (/; s/$/ working tree)/')"
  note "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  local device
  device=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null |
    head -n 1)
  note "device: ${device:-none (nvidia-smi found no GPU)}"
  note "cuda: $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo 'nvcc not found')"
  note ""
  note "## 1. gpu-labelled tests (one at a time: gpu_daemon_test compares with the driver's count)"
  run_tests 300 1 "${gpu_tests[@]}"
  note ""
  note "## 2. integration suite on --backend=cuda (8 logical devices of GPU 0)"
  mapfile -t integration <"$work/stage/integration.txt"
  PLACEMENT_TEST_BACKEND=cuda run_tests 300 6 "${integration[@]}"
  note ""
  note "## 3. compute-sanitizer --tool memcheck"
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  memcheck() {  # memcheck NAME SANITIZER-ARGS...
    local t=$1
    shift
    timeout 300 "$sanitizer" --tool memcheck --error-exitcode 3 "$@" "$bin/$t" \
      >"$logs/memcheck-$t.log" 2>&1
    local rc=$?
    if grep -q 'Device not supported' "$logs/memcheck-$t.log"; then
      note "  memcheck $t: NOT RUN (compute-sanitizer: Device not supported on this machine)"
      return
    fi
    result "memcheck $t" "$logs/memcheck-$t.log" $rc
  }
  for t in "${memcheck_tests[@]}"; do memcheck "$t" --target-processes all; done
  # NCCL probes its kernels at communicator creation and handles the
  # cudaErrorNoKernelImageForDevice answers itself (docs/gpu.md).
  memcheck nccl_engine_test --report-api-errors no
  note ""
  note "## 4. a 2-daemon cluster on the one GPU (--backend=cuda, logical devices)"
  PLACEMENT_TEST_BACKEND=cuda run_tests 300 2 "${cluster_tests[@]}"
  note ""
  note "## 5. benchmark rows (each against its baseline in the same run)"
  bench() {  # bench TITLE COMMAND...
    local title=$1
    shift
    note "### $title"
    note "\$ $(basename "$1") ${*:2}"
    timeout 240 "$@" >"$logs/bench.log" 2>&1
    local rc=$?
    grep -vE '^\[placementd|^I[0-9]|^W[0-9]' "$logs/bench.log" | sed 's/^/    /' | tee -a "$record" >/dev/null
    result "$title" "$logs/bench.log" $rc bench
  }
  bench "upload/download and regions vs pinned cudaMemcpy" "$bin/tensor_transfer_bench" \
    --backend=cuda --devices=1 --size_mib=256 --reps=3 --reshard_replicated=false
  bench "CUDA IPC view (export + open + device read) vs the reader's own device-to-device copy" \
    "$bin/view_gpu_test" --gtest_filter='*ImportsItsOwnMemory*'
  bench "prefetch at compute = transfer and 2x" "$bin/prefetch_bench" --backend=cuda \
    --devices=1 --step_factors=1,2 --rounds=3 --steps=40
  bench "prefetch through regions" "$bin/prefetch_bench" --backend=cuda --devices=1 \
    --path=region --step_factors=1,2 --rounds=3 --steps=40
  bench "collectives: NCCL part" "$bin/collective_bench" --gloo=false --min_time_ms=100 \
    --max_bytes=$((64 << 20))
  note ""
  note "## 6. CPU rows with a core per daemon (issue 24's targets; CPU devices, $(nproc) cores)"
  bench "cluster all-reduce, 2 daemons, vs Gloo direct" "$bin/cluster_bench" --processes=2 \
    --sections=allreduce --source=donate --min_bytes=65536 --max_bytes=16777216 --reps=3 \
    --min_time_ms=400
  bench "cluster all-reduce, 4 daemons, vs Gloo direct" "$bin/cluster_bench" --processes=4 \
    --sections=allreduce --source=donate --min_bytes=65536 --max_bytes=16777216 --reps=3 \
    --min_time_ms=400
  bench "1 KiB collective vs a bare gRPC echo" "$bin/device_latency_bench" --transport=tcp \
    --iterations=5000
  note ""
  note "took: $(($(date +%s) - started)) s"
  note "$passed passed, $failed failed"
  [[ $failed == 0 ]]
}

case $mode in
  prepare) prepare ;;
  run) run ;;
  *)
    sed -n '2,30p' "$0"
    exit 2
    ;;
esac
