// What the cluster_bench sections (cluster_bench_*.cc) share: the run's
// settings, the running cluster, and small helpers. Internal to the
// benchmark.
#ifndef PLACEMENT_BENCH_CLUSTER_BENCH_COMMON_H_
#define PLACEMENT_BENCH_CLUSTER_BENCH_COMMON_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/cluster_daemons.h"
#include "bench/gloo_rank_processes.h"
#include "grpcpp/grpcpp.h"
#include "placement/client/placement.h"

namespace placement::bench {

namespace pc = ::placement::client;

struct Settings {
  int processes = 2;
  int devices_per_process = 1;
  std::vector<int64_t> sizes;
  int reps = 5;
  absl::Duration min_time;
  int max_iters = 100;
  pc::SourceHandling source = pc::SourceHandling::kKeep;
  int commit_iterations = 300;
  int64_t commit_bytes = 1024;
  int64_t place_bytes = 0;
  int place_reps = 7;
  int64_t chunk_bytes = 1 << 20;
  bool allreduce = true, commit = true, place = true;
};

struct Cluster {
  ClusterDaemons* daemons = nullptr;
#if PLACEMENT_WITH_GLOO
  // Gloo ranks as processes (the all-reduce section's second baseline);
  // null when not started.
  GlooRankProcesses* gloo_processes = nullptr;
#endif
  int devices_per_process = 1;
  std::vector<std::unique_ptr<pc::Client>> clients;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::shared_ptr<grpc::Channel> coordinator;

  int processes() const { return daemons->size(); }
  // Global device ids are dense in (process, local index) order.
  std::vector<int64_t> DevicesOf(int first_process, int num_processes) const {
    std::vector<int64_t> ids;
    for (int64_t d = first_process * devices_per_process;
         d < (first_process + num_processes) * devices_per_process; ++d) {
      ids.push_back(d);
    }
    return ids;
  }
  absl::StatusOr<pc::Mesh> Mesh(const std::vector<int64_t>& devices) const {
    return pc::MeshClient(*clients[0])
        .Create({{"data", static_cast<int64_t>(devices.size())}}, {.device_ids = devices});
  }
};

double Seconds(absl::Duration d);
// "64 KiB", "4 MiB".
std::string SizeName(int64_t bytes);
// /proc/loadavg's three averages.
std::string LoadAverage();
// A channel to `address` that carries messages of up to 16 MiB.
std::shared_ptr<grpc::Channel> Dial(const std::string& address);
// `s` as an absl::Status whose message starts with `what`.
absl::Status FromGrpc(const grpc::Status& s, absl::string_view what);
// Runs fn(thread) on `n` threads and joins them.
void OnThreads(int n, const std::function<void(int)>& fn);

// A barrier whose waiters spin, yielding the CPU to runnable threads,
// instead of sleeping: its threads leave together, within microseconds.
// A sleeping barrier's wake-ups come hundreds of microseconds apart on a
// loaded 2-core machine, which a call timed from the first start to the
// last return would count as the daemons' time.
class SpinBarrier {
 public:
  explicit SpinBarrier(int n) : n_(n) {}
  void ArriveAndWait();

 private:
  const int n_;
  std::atomic<int> arrived_{0};
  std::atomic<uint64_t> generation_{0};
};

// The first error of several threads.
class FirstError {
 public:
  void Note(const absl::Status& s);
  absl::Status Get();

 private:
  absl::Mutex mu_;
  absl::Status status_;
};

// The sections; each prints its table (markdown) to stdout. `echo_address`
// is a bare EchoService in another process.
absl::Status RunAllReduce(const Cluster& cluster, const Settings& s);
absl::Status RunCommit(const Cluster& cluster, const std::string& echo_address, const Settings& s);
absl::Status RunPlace(const Cluster& cluster, const std::string& echo_address, const Settings& s);

}  // namespace placement::bench

#endif  // PLACEMENT_BENCH_CLUSTER_BENCH_COMMON_H_
