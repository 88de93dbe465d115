// cluster_bench: all-reduce through the daemons against Gloo direct (see cluster_bench.cc for the
// method).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "bench/cluster_bench_common.h"
#include "bench/gloo_ranks.h"
#include "placement/client/collectives.h"
#include "placement/v1/cluster_service.grpc.pb.h"
#include "placement/v1/collective_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"

namespace placement::bench {
namespace {

namespace pv1 = ::placement::v1;

// The all-reduce through the daemons, on an input sharded P('data') over
// every device of the cluster with `block` bytes per device.
class DaemonAllReduce {
 public:
  DaemonAllReduce(const Cluster& cluster, pc::Mesh mesh, pc::SourceHandling source)
      : cluster_(cluster), mesh_(std::move(mesh)), source_(source) {
    for (const auto& channel : cluster.channels) {
      stubs_.push_back(pv1::CollectiveService::NewStub(channel));
    }
  }

  absl::Status UploadInput(int64_t block) {
    const int64_t count = block / 4 * static_cast<int64_t>(mesh_.device_ids.size());
    std::vector<float> zeros(static_cast<size_t>(count), 0.0f);
    pc::UploadOptions options;
    options.path = pc::TransferPath::kStream;
    auto info = pc::TensorClient(*cluster_.clients[0])
                    .Upload(pc::HostArray::Of(zeros, {count}),
                            pc::Placement::Sharded(mesh_, {{"data"}}), options);
    if (!info.ok()) return info.status();
    input_ = info->id;
    count_ = count;
    return absl::OkStatus();
  }

  absl::Status DeleteInput() {
    return pc::TensorClient(*cluster_.clients[0]).Delete({input_}).status();
  }

  // Mean seconds per single-controller AllReduce (CollectiveClient on
  // daemon 0); only the RPC is timed.
  absl::StatusOr<double> TimeSingle(int iters) {
    pc::CollectiveClient collectives(*cluster_.clients[0]);
    double total = 0;
    for (int i = 0; i < iters; ++i) {
      const absl::Time start = absl::Now();
      auto reduced =
          collectives.AllReduce(input_, pc::ReduceOp::kSum, {.axes = {"data"}, .source = source_});
      total += Seconds(absl::Now() - start);
      if (!reduced.ok()) return reduced.status();
      if (absl::Status s = AfterCall(reduced->id); !s.ok()) {
        return absl::Status(s.code(),
                            absl::StrCat("after a single-controller call: ", s.message()));
      }
    }
    return total / iters;
  }

  // Mean seconds per multi-controller AllReduce: one thread per process
  // calls its own daemon; an iteration lasts from the first call's start
  // to the last call's return. The threads leave a spinning barrier
  // together before each call (SpinBarrier), as Gloo direct's ranks run
  // their calls back to back.
  absl::StatusOr<double> TimeMulti(int iters) {
    const int n = cluster_.processes();
    SpinBarrier sync(n);
    std::vector<absl::Time> starts(n), ends(n);
    std::string result;
    FirstError error;
    bool failed = false;
    double total = 0;
    OnThreads(n, [&](int t) {
      for (int i = 0; i < iters; ++i) {
        sync.ArriveAndWait();
        pv1::AllReduceRequest request;
        request.set_tensor_id(input_);
        request.add_axes("data");
        request.set_op(pv1::REDUCE_OP_SUM);
        request.set_source(source_ == pc::SourceHandling::kDonate ? pv1::SOURCE_HANDLING_DONATE
                                                                  : pv1::SOURCE_HANDLING_KEEP);
        request.set_controller(pv1::CONTROLLER_MULTI);
        pv1::CollectiveResponse response;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
        starts[t] = absl::Now();
        grpc::Status status = stubs_[t]->AllReduce(&context, request, &response);
        ends[t] = absl::Now();
        error.Note(FromGrpc(status, absl::StrCat("multi-controller AllReduce on process ", t)));
        if (t == 0) result = response.tensor().id();
        sync.ArriveAndWait();
        if (t == 0) {
          total += Seconds(*std::max_element(ends.begin(), ends.end()) -
                           *std::min_element(starts.begin(), starts.end()));
          absl::Status s = error.Get();
          if (s.ok()) s = AfterCall(result);
          if (!s.ok()) {
            s = absl::Status(s.code(),
                             absl::StrCat("after a multi-controller call: ", s.message()));
          }
          error.Note(s);
          failed = !s.ok();
        }
        sync.ArriveAndWait();
        if (failed) return;
      }
    });
    if (absl::Status s = error.Get(); !s.ok()) return s;
    return total / iters;
  }

 private:
  // KEEP: frees the result. DONATE: the input is gone and `result` is the
  // reduced block replicated on every device; its buffers become the next
  // input, sharded again (Disassemble + Assemble, both donating: buffers
  // move, no bytes are copied).
  absl::Status AfterCall(const std::string& result) {
    pc::TensorClient tensors(*cluster_.clients[0]);
    if (source_ == pc::SourceHandling::kKeep) return tensors.Delete({result}).status();
    auto pieces = tensors.Disassemble(result, pc::SourceHandling::kDonate);
    if (!pieces.ok()) {
      return absl::Status(pieces.status().code(),
                          absl::StrCat("Disassemble: ", pieces.status().message()));
    }
    std::vector<std::string> ids;
    for (const auto& p : *pieces) ids.push_back(p.id);
    auto input = tensors.Assemble({count_}, pc::Placement::Sharded(mesh_, {{"data"}}), ids,
                                  pc::SourceHandling::kDonate);
    if (!input.ok()) return input.status();
    input_ = input->id;
    return absl::OkStatus();
  }

  const Cluster& cluster_;
  pc::Mesh mesh_;
  pc::SourceHandling source_;
  std::vector<std::unique_ptr<pv1::CollectiveService::Stub>> stubs_;
  std::string input_;
  int64_t count_ = 0;
};

}  // namespace

absl::Status RunAllReduce(const Cluster& cluster, const Settings& s) {
  const int n = cluster.processes();
  auto mesh = cluster.Mesh(cluster.DevicesOf(0, n));
  if (!mesh.ok()) return mesh.status();
  std::printf(
      "\n## All-reduce: through the daemons vs Gloo direct (f32 SUM, %d processes, %d device(s) "
      "per process, source %s)\n\n",
      n, s.devices_per_process, s.source == pc::SourceHandling::kKeep ? "KEEP" : "DONATE");
#if PLACEMENT_WITH_GLOO
  using Staging = GlooRanks::Staging;
  auto gloo = GlooRanks::Connect(n);
  if (!gloo.ok()) return gloo.status();
#endif
  DaemonAllReduce daemons(cluster, *mesh, s.source);
  const double bus = 2.0 * (n - 1) / n;
  std::printf(
      "| block per device | iters x reps | Gloo direct us | Gloo busbw GB/s | + copies us | "
      "+ our kernels us | + fresh scratch us | Gloo in processes us | single-controller us | "
      "busbw GB/s | single / Gloo busbw | single / processes | multi-controller us | busbw GB/s | "
      "multi / Gloo busbw | multi / processes |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int64_t bytes : s.sizes) {
    if (absl::Status st = daemons.UploadInput(bytes); !st.ok()) return st;
    // Warm-up (Gloo contexts, first-touch pages) and the iteration count.
    double gloo_first = 0;
#if PLACEMENT_WITH_GLOO
    for (auto staging : {Staging::kNone, Staging::kCopies, Staging::kKernels, Staging::kFresh}) {
      (*gloo)->Time(bytes, 1, staging);
    }
    gloo_first = (*gloo)->Time(bytes, 1, Staging::kNone);
    if (cluster.gloo_processes != nullptr) {
      if (auto t = cluster.gloo_processes->Time(bytes, 1); !t.ok()) return t.status();
    }
#endif
    auto single_first = daemons.TimeSingle(1);
    if (!single_first.ok()) return single_first.status();
    if (auto multi = daemons.TimeMulti(1); !multi.ok()) return multi.status();
    const double first = gloo_first > 0 ? gloo_first : *single_first;
    const int iters = std::clamp(static_cast<int>(Seconds(s.min_time) / first), 2, s.max_iters);
    std::vector<double> direct, copies, kernels, staged, processes, single, multi;
    // One measurement of each row per rep, the order rotating from rep to
    // rep: the row right after the daemons' calls shares the cores with
    // their leftover work (replies, frees), and at small sizes a fixed order
    // left the Gloo direct row, always first, slower than its own variants
    // that do more.
    std::vector<std::function<absl::Status()>> rows;
#if PLACEMENT_WITH_GLOO
    for (auto [staging, out] :
         {std::pair{Staging::kNone, &direct}, std::pair{Staging::kCopies, &copies},
          std::pair{Staging::kKernels, &kernels}, std::pair{Staging::kFresh, &staged}}) {
      rows.push_back([&, staging, out]() -> absl::Status {
        out->push_back((*gloo)->Time(bytes, iters, staging));
        return absl::OkStatus();
      });
    }
    if (cluster.gloo_processes != nullptr) {
      rows.push_back([&]() -> absl::Status {
        auto t = cluster.gloo_processes->Time(bytes, iters);
        if (!t.ok()) return t.status();
        processes.push_back(*t);
        return absl::OkStatus();
      });
    }
#endif
    rows.push_back([&]() -> absl::Status {
      auto t = daemons.TimeSingle(iters);
      if (!t.ok()) return t.status();
      single.push_back(*t);
      return absl::OkStatus();
    });
    rows.push_back([&]() -> absl::Status {
      auto t = daemons.TimeMulti(iters);
      if (!t.ok()) return t.status();
      multi.push_back(*t);
      return absl::OkStatus();
    });
    for (int rep = 0; rep < s.reps; ++rep) {
      for (size_t k = 0; k < rows.size(); ++k) {
        if (absl::Status st = rows[(rep + k) % rows.size()](); !st.ok()) return st;
      }
    }
    if (absl::Status st = daemons.DeleteInput(); !st.ok()) return st;
    const double g = Median(direct), cp = Median(copies), kn = Median(kernels);
    const double st = Median(staged), gp = Median(processes);
    const double sc = Median(single), mc = Median(multi);
    auto us = [](double t) { return t > 0 ? absl::StrFormat("%.0f", t * 1e6) : std::string("-"); };
    auto bw = [&](double t) {
      return t > 0 ? absl::StrFormat("%.3f", bus * bytes / t / 1e9) : std::string("-");
    };
    auto ratio = [&](double base, double t) {
      return base > 0 && t > 0 ? absl::StrFormat("%.2f", base / t) : std::string("-");
    };
    std::printf(
        "| %s | %d x %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
        "|\n",
        SizeName(bytes).c_str(), iters, s.reps, us(g).c_str(), bw(g).c_str(), us(cp).c_str(),
        us(kn).c_str(), us(st).c_str(), us(gp).c_str(), us(sc).c_str(), bw(sc).c_str(),
        ratio(g, sc).c_str(), ratio(gp, sc).c_str(), us(mc).c_str(), bw(mc).c_str(),
        ratio(g, mc).c_str(), ratio(gp, mc).c_str());
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

}  // namespace placement::bench
