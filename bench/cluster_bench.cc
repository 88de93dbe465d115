// Cluster benchmarks (issue 9): N placementd daemons (separate processes,
// one cluster on TCP loopback, CPU devices) against baselines measured in
// the same run on the same machine:
//
//   allreduce  AllReduce (f32 SUM) of a tensor sharded on dim 0 over a mesh
//              of every daemon's devices (one block per device), through the
//              daemons -- single-controller (one CollectiveClient call on
//              daemon 0) and multi-controller (one thread per process, each
//              calling its own daemon with CONTROLLER_MULTI) -- against
//              Gloo's ring all-reduce (gloo::allreduce, RING, gloo::sum)
//              called directly by N ranks (threads of this process, each
//              with its own Gloo TCP device) over 127.0.0.1 on one buffer of
//              the same size per rank: the same ranks on the wire as the
//              daemons' Gloo participants (one per process). Three more Gloo
//              rows add, one at a time, what the daemons' multi-device data
//              path (server/collective/transport/gloo/hierarchical_collectives.cc)
//              does around the same Gloo call: staging copies in and out of a
//              scratch, the daemons' reduce kernels, and a fresh scratch per
//              call (with one device per process the daemons skip all three
//              and reduce in place). "Gloo in processes" runs the direct
//              ring all-reduce with each rank a process of its own, as
//              torch.distributed's gloo backend does (gloo_rank_processes.h),
//              and the daemons' rows give their ratio to it too.
//              busbw = 2(n-1)/n * block bytes / time, n = processes.
//   commit     multi-controller host_to_global commit: every process's
//              thread uploads a small process-local part to its own daemon
//              (header.process_local), against a bare gRPC echo of the same
//              bytes to a server in another process (EchoService), a bare
//              ClusterService.Barrier round of all N on the coordinator, and
//              a plain upload of the same bytes to the caller's own daemon.
//   place      single-controller Place of a tensor sharded on process 0's
//              devices to the same sharding on process 1's devices (every
//              byte crosses daemons), against a bare gRPC client stream
//              (EchoService.Sink) and server stream (Source) of the same
//              bytes in the same chunks to another process.
//
// Every measurement is interleaved with its baselines rep by rep.
//
//   build/bin/cluster_bench [--processes=2] [--devices_per_process=1]
//       [--min_bytes=65536] [--max_bytes=67108864] [--reps=5]
//
// The sections live in cluster_bench_allreduce.cc, cluster_bench_commit.cc
// and cluster_bench_place.cc; what they share in cluster_bench_common.h.
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "bench/cluster_bench_common.h"
#include "bench/cluster_daemons.h"
#include "bench/echo_process.h"
#include "common/lock_order_checks.h"
#include "server/logging.h"

ABSL_FLAG(int, processes, 2, "Daemons in the cluster (and Gloo ranks in the baseline).");
ABSL_FLAG(int, devices_per_process, 1, "CPU devices per daemon; the mesh spans all of them.");
ABSL_FLAG(int64_t, min_bytes, 64 << 10, "Smallest all-reduce block per device (x4 steps).");
ABSL_FLAG(int64_t, max_bytes, 64 << 20, "Largest all-reduce block per device.");
ABSL_FLAG(int, reps, 5, "Interleaved reps per all-reduce size (medians printed).");
ABSL_FLAG(int, min_time_ms, 1000, "Target time of one all-reduce measurement (sets iterations).");
ABSL_FLAG(int, max_iters, 400, "Most iterations of one all-reduce measurement.");
ABSL_FLAG(std::string, source, "keep",
          "All-reduce input: keep (result freed between calls) "
          "or donate (in place; result re-sharded between calls).");
ABSL_FLAG(int, commit_iterations, 300, "Commit-latency rounds (each: echo, barrier, commit).");
ABSL_FLAG(int64_t, commit_bytes, 1024, "Bytes each process uploads per commit.");
ABSL_FLAG(int64_t, place_mib, 64, "Place / byte-stream size in MiB.");
ABSL_FLAG(int, place_reps, 7, "Interleaved Place reps (best and median printed).");
ABSL_FLAG(int64_t, chunk_bytes, 1 << 20, "Chunk size of the bare byte streams.");
ABSL_FLAG(std::string, sections, "allreduce,commit,place", "Which benchmarks to run.");
ABSL_FLAG(bool, quick, false, "Smoke test: small sizes, one rep, few iterations.");
ABSL_FLAG(std::string, placementd, "", "placementd binary (default: next to this one).");
ABSL_FLAG(std::vector<std::string>, daemon_flags, {},
          "More flags for every daemon, comma-separated "
          "(--daemon_flags=--cluster_check_collectives=false).");

namespace placement::bench {
namespace {

Settings FromFlags() {
  Settings s;
  const bool quick = absl::GetFlag(FLAGS_quick);
  s.processes = absl::GetFlag(FLAGS_processes);
  s.devices_per_process = absl::GetFlag(FLAGS_devices_per_process);
  const int64_t max_bytes = quick ? std::min<int64_t>(absl::GetFlag(FLAGS_max_bytes), 1 << 20)
                                  : absl::GetFlag(FLAGS_max_bytes);
  for (int64_t b = absl::GetFlag(FLAGS_min_bytes); b <= max_bytes; b *= 4) s.sizes.push_back(b);
  s.reps = quick ? 1 : absl::GetFlag(FLAGS_reps);
  s.min_time = absl::Milliseconds(quick ? 20 : absl::GetFlag(FLAGS_min_time_ms));
  s.max_iters = quick ? 5 : absl::GetFlag(FLAGS_max_iters);
  s.source = absl::GetFlag(FLAGS_source) == "donate" ? pc::SourceHandling::kDonate
                                                     : pc::SourceHandling::kKeep;
  s.commit_iterations = quick ? 10 : absl::GetFlag(FLAGS_commit_iterations);
  s.commit_bytes = absl::GetFlag(FLAGS_commit_bytes);
  s.place_bytes = (quick ? 4 : absl::GetFlag(FLAGS_place_mib)) << 20;
  s.place_reps = quick ? 1 : absl::GetFlag(FLAGS_place_reps);
  s.chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  const std::string sections = absl::GetFlag(FLAGS_sections);
  s.allreduce = absl::StrContains(sections, "allreduce");
  s.commit = absl::StrContains(sections, "commit");
  s.place = absl::StrContains(sections, "place") && s.processes >= 2;
  return s;
}

int Run(int argc, char** argv) {
  const Settings s = FromFlags();
  // Children first: nothing gRPC may exist in this process when it forks.
#if PLACEMENT_WITH_GLOO
  std::unique_ptr<GlooRankProcesses> gloo_processes;
  if (s.allreduce) {
    auto started = GlooRankProcesses::Start(s.processes);
    if (!started.ok()) {
      std::fprintf(stderr, "gloo rank processes: %s\n", started.status().ToString().c_str());
      return 1;
    }
    gloo_processes = *std::move(started);
  }
#endif
  auto echo = EchoProcess::Start("127.0.0.1:0");
  if (!echo.ok()) {
    std::fprintf(stderr, "echo server: %s\n", echo.status().ToString().c_str());
    return 1;
  }
  ClusterDaemonsOptions options;
  options.placementd = absl::GetFlag(FLAGS_placementd);
  options.num_processes = s.processes;
  options.devices_per_process = s.devices_per_process;
  const int64_t max_block = s.sizes.empty() ? 0 : s.sizes.back();
  options.device_memory =
      std::max<int64_t>(3 * max_block, 2 * s.place_bytes / s.devices_per_process) + (64 << 20);
  options.extra_flags = {"--cluster_op_timeout=2m"};
  for (const std::string& flag : absl::GetFlag(FLAGS_daemon_flags))
    options.extra_flags.push_back(flag);
  auto daemons = ClusterDaemons::Start(options);
  if (!daemons.ok()) {
    std::fprintf(stderr, "cluster: %s\n", daemons.status().ToString().c_str());
    return 1;
  }
  Cluster cluster;
  cluster.daemons = daemons->get();
#if PLACEMENT_WITH_GLOO
  cluster.gloo_processes = gloo_processes.get();
#endif
  cluster.devices_per_process = s.devices_per_process;
  for (int i = 0; i < s.processes; ++i) {
    auto client = pc::Client::Connect((*daemons)->address(i));
    if (!client.ok()) {
      std::fprintf(stderr, "connect %d: %s\n", i, client.status().ToString().c_str());
      return 1;
    }
    cluster.clients.push_back(*std::move(client));
    cluster.channels.push_back(Dial((*daemons)->address(i)));
  }
  cluster.coordinator = Dial((*daemons)->peer_address(0));

  std::printf("# cluster_bench:");
  for (int i = 1; i < argc; ++i) std::printf(" %s", argv[i]);
  std::printf(
      "\n%d daemons on 127.0.0.1 (%d CPU device(s) each), %u hardware threads, load "
      "average at start %s\n",
      s.processes, s.devices_per_process, std::thread::hardware_concurrency(),
      LoadAverage().c_str());
  absl::Status status;
  if (status.ok() && s.allreduce) status = RunAllReduce(cluster, s);
  if (status.ok() && s.commit) status = RunCommit(cluster, (*echo)->address(), s);
  if (status.ok() && s.place) status = RunPlace(cluster, (*echo)->address(), s);
  std::printf("\nload average at end %s\n", LoadAverage().c_str());
  if (!status.ok()) {
    std::fprintf(stderr, "cluster_bench: %s\n", status.ToString().c_str());
    for (int i = 0; i < s.processes; ++i) {
      std::fprintf(stderr, "--- daemon %d log ---\n%s\n", i, (*daemons)->Stderr(i).c_str());
    }
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace placement::bench

int main(int argc, char** argv) {
  placement::SkipLockOrderChecksInRelease();
  absl::ParseCommandLine(argc, argv);
  placement::server::SetLogLevel(placement::server::LogLevel::kWarning);
  return placement::bench::Run(argc, argv);
}
