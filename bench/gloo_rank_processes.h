// GlooRankProcesses: cluster_bench's direct-Gloo baseline as a user of
// torch.distributed's gloo backend runs it -- N Gloo ranks, each a child
// process of its own (forked, no exec) with one Gloo TCP device on
// 127.0.0.1, rendezvousing through Gloo's FileStore in a temporary
// directory and running Gloo's ring all-reduce (f32 SUM) in place on its
// own buffer. GlooRanks (gloo_ranks.h) runs the same ranks as threads of
// one process, which on a machine with fewer cores than ranks switches
// between them more cheaply than between the daemons' processes.
//
// Start() forks: call it before this process creates any gRPC object or
// thread (like EchoProcess). The children serve Time() requests over pipes
// until this object is destroyed (or this process dies: a child whose pipe
// closes exits). Not thread-safe.
#ifndef PLACEMENT_BENCH_GLOO_RANK_PROCESSES_H_
#define PLACEMENT_BENCH_GLOO_RANK_PROCESSES_H_

#if PLACEMENT_WITH_GLOO

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace placement::bench {

class GlooRankProcesses {
 public:
  // Forks `n` ranks and waits until they have connected (a full mesh each);
  // an error naming the rank that could not.
  static absl::StatusOr<std::unique_ptr<GlooRankProcesses>> Start(int n);
  // Kills the children and waits for them.
  ~GlooRankProcesses();
  GlooRankProcesses(const GlooRankProcesses&) = delete;
  GlooRankProcesses& operator=(const GlooRankProcesses&) = delete;

  // Mean seconds per in-place ring all-reduce of `bytes` (whole f32
  // elements) per rank over `iters` calls, from a Gloo barrier before the
  // first to one after the last, as rank 0 measures it. Buffers are
  // allocated and touched before the clock starts. An error when a rank
  // failed or died.
  absl::StatusOr<double> Time(int64_t bytes, int iters);

 private:
  GlooRankProcesses() = default;
  struct Rank {
    pid_t pid = -1;
    int command_fd = -1;  // parent -> child
    int result_fd = -1;   // child -> parent
  };
  std::vector<Rank> ranks_;
  std::string dir_;  // the FileStore's
};

}  // namespace placement::bench

#endif  // PLACEMENT_WITH_GLOO
#endif  // PLACEMENT_BENCH_GLOO_RANK_PROCESSES_H_
