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
//              rows add, one at a time, what the daemons' data path
//              (server/collective/cluster/hierarchical_collectives.cc) does
//              around the same Gloo call: staging copies in and out of a
//              scratch, the daemons' reduce kernels, and a fresh scratch per
//              call. busbw = 2(n-1)/n * block bytes / time, n = processes.
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
//       [--sections=allreduce,commit,place] [--source=keep|donate] [--quick]
#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "bench/cluster_daemons.h"
#include "bench/echo_process.h"
#include "bench/gloo_ranks.h"
#include "grpcpp/grpcpp.h"
#include "placement/client/collectives.h"
#include "placement/client/placement.h"
#include "placement/v1/cluster_service.grpc.pb.h"
#include "placement/v1/collective_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"
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

namespace placement::bench {
namespace {

namespace pc = ::placement::client;
namespace pv1 = ::placement::v1;

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

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string SizeName(int64_t bytes) {
  return bytes >= (1 << 20) ? absl::StrFormat("%lld MiB", static_cast<long long>(bytes >> 20))
                            : absl::StrFormat("%lld KiB", static_cast<long long>(bytes >> 10));
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

std::shared_ptr<grpc::Channel> Dial(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(16 << 20);
  args.SetMaxSendMessageSize(16 << 20);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

absl::Status FromGrpc(const grpc::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, ": ", s.error_message()));
}

// Runs fn(thread) on `n` threads and joins them.
void OnThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) threads.emplace_back(fn, t);
  for (auto& t : threads) t.join();
}

// The first error of several threads.
class FirstError {
 public:
  void Note(const absl::Status& s) {
    if (s.ok()) return;
    absl::MutexLock lock(&mu_);
    if (status_.ok()) status_ = s;
  }
  absl::Status Get() {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  absl::Mutex mu_;
  absl::Status status_;
};

// What the benchmarks use of the running cluster: a client and a channel
// per daemon, and a channel to the coordinator's peer port.
struct Cluster {
  ClusterDaemons* daemons = nullptr;
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
        .CreateMesh({{"data", static_cast<int64_t>(devices.size())}}, {.device_ids = devices});
  }
};

// ---------------------------------------------------------------------------
// All-reduce
// ---------------------------------------------------------------------------

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
  // to the last call's return.
  absl::StatusOr<double> TimeMulti(int iters) {
    const int n = cluster_.processes();
    std::barrier sync(n);
    std::vector<absl::Time> starts(n), ends(n);
    std::string result;
    FirstError error;
    bool failed = false;
    double total = 0;
    OnThreads(n, [&](int t) {
      for (int i = 0; i < iters; ++i) {
        sync.arrive_and_wait();
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
        sync.arrive_and_wait();
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
        sync.arrive_and_wait();
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
      "+ our kernels us | + fresh scratch (daemon data path) us | single-controller us | "
      "busbw GB/s | single / Gloo busbw | multi-controller us | busbw GB/s | multi / Gloo "
      "busbw |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int64_t bytes : s.sizes) {
    if (absl::Status st = daemons.UploadInput(bytes); !st.ok()) return st;
    // Warm-up (Gloo contexts, first-touch pages) and the iteration count.
    double gloo_first = 0;
#if PLACEMENT_WITH_GLOO
    for (auto staging : {Staging::kNone, Staging::kCopies, Staging::kKernels, Staging::kFresh}) {
      (*gloo)->Time(bytes, 1, staging);
    }
    gloo_first = (*gloo)->Time(bytes, 1, Staging::kNone);
#endif
    auto single_first = daemons.TimeSingle(1);
    if (!single_first.ok()) return single_first.status();
    if (auto multi = daemons.TimeMulti(1); !multi.ok()) return multi.status();
    const double first = gloo_first > 0 ? gloo_first : *single_first;
    const int iters = std::clamp(static_cast<int>(Seconds(s.min_time) / first), 2, s.max_iters);
    std::vector<double> direct, copies, kernels, staged, single, multi;
    for (int rep = 0; rep < s.reps; ++rep) {
#if PLACEMENT_WITH_GLOO
      direct.push_back((*gloo)->Time(bytes, iters, Staging::kNone));
      copies.push_back((*gloo)->Time(bytes, iters, Staging::kCopies));
      kernels.push_back((*gloo)->Time(bytes, iters, Staging::kKernels));
      staged.push_back((*gloo)->Time(bytes, iters, Staging::kFresh));
#endif
      auto t_single = daemons.TimeSingle(iters);
      if (!t_single.ok()) return t_single.status();
      single.push_back(*t_single);
      auto t_multi = daemons.TimeMulti(iters);
      if (!t_multi.ok()) return t_multi.status();
      multi.push_back(*t_multi);
    }
    if (absl::Status st = daemons.DeleteInput(); !st.ok()) return st;
    const double g = Median(direct), cp = Median(copies), kn = Median(kernels);
    const double st = Median(staged);
    const double sc = Median(single), mc = Median(multi);
    auto us = [](double t) { return t > 0 ? absl::StrFormat("%.0f", t * 1e6) : std::string("-"); };
    auto bw = [&](double t) {
      return t > 0 ? absl::StrFormat("%.3f", bus * bytes / t / 1e9) : std::string("-");
    };
    auto ratio = [&](double t) {
      return g > 0 && t > 0 ? absl::StrFormat("%.2f", g / t) : std::string("-");
    };
    std::printf("| %s | %d x %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                SizeName(bytes).c_str(), iters, s.reps, us(g).c_str(), bw(g).c_str(),
                us(cp).c_str(), us(kn).c_str(), us(st).c_str(), us(sc).c_str(), bw(sc).c_str(),
                ratio(sc).c_str(), us(mc).c_str(), bw(mc).c_str(), ratio(mc).c_str());
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Multi-controller commit latency
// ---------------------------------------------------------------------------

absl::Status RunCommit(const Cluster& cluster, const std::string& echo_address, const Settings& s) {
  const int n = cluster.processes();
  auto mesh = cluster.Mesh(cluster.DevicesOf(0, n));
  if (!mesh.ok()) return mesh.status();
  std::vector<std::string> own_meshes;  // each process's devices only
  for (int p = 0; p < n; ++p) {
    auto own = cluster.Mesh(cluster.DevicesOf(p, 1));
    if (!own.ok()) return own.status();
    own_meshes.push_back(own->id);
  }
  // Each process's part covers its devices' blocks of f32[n * local].
  const int64_t k = s.devices_per_process;
  const int64_t local = std::max<int64_t>(1, s.commit_bytes / 4 / k) * k;
  const std::string payload(static_cast<size_t>(local * 4), '\0');
  std::printf(
      "\n## Multi-controller commit latency (%d processes, %lld bytes per process) vs a bare "
      "echo\n\n",
      n, static_cast<long long>(local * 4));

  auto echo = v1::EchoService::NewStub(Dial(echo_address));
  auto barrier = pv1::ClusterService::NewStub(cluster.coordinator);
  std::vector<std::unique_ptr<pv1::TensorService::Stub>> tensors;
  for (const auto& channel : cluster.channels)
    tensors.push_back(pv1::TensorService::NewStub(channel));
  pc::TensorClient deleter(*cluster.clients[0]);

  // kUpload: the same upload to the caller's own daemon, of a tensor on that
  // daemon's devices only (no process_local, no barrier).
  enum Kind { kEcho, kBarrier, kUpload, kCommit, kKinds };
  std::vector<std::vector<double>> samples(kKinds);  // every call's seconds
  std::vector<double> all_committed;                 // first start to last return
  std::vector<absl::Time> starts(n), ends(n);
  std::vector<double> call(n);
  std::string committed_id;
  std::vector<std::string> uploaded(n);
  std::barrier sync(n);
  FirstError error;
  bool failed = false;

  auto call_once = [&](int t, Kind kind, int round) -> absl::Status {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    if (kind == kEcho) {
      v1::EchoMessage request, response;
      request.set_payload(payload);
      return FromGrpc(echo->Echo(&context, request, &response), "echo");
    }
    if (kind == kBarrier) {
      pv1::BarrierRequest request;
      request.set_barrier_id(absl::StrCat("cluster_bench/", round));
      request.set_process_index(t);
      for (int p = 0; p < n; ++p) request.add_participants(p);
      request.set_payload(payload.substr(0, 64));
      request.mutable_timeout()->set_seconds(60);
      pv1::BarrierResponse response;
      return FromGrpc(barrier->Barrier(&context, request, &response), "barrier");
    }
    pv1::UploadResponse response;
    auto writer = tensors[t]->Upload(&context, &response);
    pv1::UploadRequest header;
    pv1::UploadHeader* h = header.mutable_header();
    h->set_dtype(pv1::DTYPE_F32);
    h->add_shape(local);
    pv1::Sharding* sharding = h->mutable_rule()->mutable_placement()->mutable_sharding();
    sharding->set_mesh_id(kind == kCommit ? mesh->id : own_meshes[t]);
    sharding->mutable_spec()->add_dims()->add_axes("data");
    if (kind == kCommit) {
      h->mutable_process_local()->set_global_name(absl::StrCat("cluster_bench/commit/", round));
    }
    pv1::UploadRequest chunk;
    chunk.set_chunk(payload);
    writer->Write(header);
    writer->WriteLast(chunk, grpc::WriteOptions());
    absl::Status status = FromGrpc(writer->Finish(), absl::StrCat("process-local upload ", t));
    if (kind == kUpload) uploaded[t] = response.tensor().id();
    if (kind == kCommit && t == 0) committed_id = response.tensor().id();
    return status;
  };

  OnThreads(n, [&](int t) {
    for (int round = 0; round < s.commit_iterations; ++round) {
      for (int j = 0; j < kKinds; ++j) {
        const Kind kind = static_cast<Kind>((round + j) % kKinds);  // rotate the order
        sync.arrive_and_wait();
        starts[t] = absl::Now();
        error.Note(call_once(t, kind, round));
        ends[t] = absl::Now();
        call[t] = Seconds(ends[t] - starts[t]);
        sync.arrive_and_wait();
        if (t == 0) {
          if (round > 0) {  // round 0 warms up
            for (double c : call) samples[kind].push_back(c);
            if (kind == kCommit) {
              all_committed.push_back(Seconds(*std::max_element(ends.begin(), ends.end()) -
                                              *std::min_element(starts.begin(), starts.end())));
            }
          }
          if (kind == kCommit && error.Get().ok()) {
            error.Note(deleter.Delete({committed_id}).status());
          } else if (kind == kUpload && error.Get().ok()) {
            error.Note(deleter.Delete(uploaded).status());
          }
          failed = !error.Get().ok();
        }
        sync.arrive_and_wait();
        if (failed) return;
      }
    }
  });
  if (absl::Status st = error.Get(); !st.ok()) return st;

  auto summarize = [](const std::vector<double>& v) {
    std::vector<absl::Duration> d;
    for (double x : v) d.push_back(absl::Seconds(x));
    return Summarize(std::move(d));
  };
  const LatencySummary base = summarize(samples[kEcho]);
  auto row = [&](const char* what, const std::vector<double>& v) {
    const LatencySummary l = summarize(v);
    std::printf("| %s | %zu | %.1f | %.1f | %.1f | %.2f / %.2f |\n", what, v.size(),
                absl::ToDoubleMicroseconds(l.p50), absl::ToDoubleMicroseconds(l.p99),
                absl::ToDoubleMicroseconds(l.mean), absl::FDivDuration(l.p50, base.p50),
                absl::FDivDuration(l.p99, base.p99));
  };
  std::printf(
      "| measurement (%d callers at once) | samples | p50 us | p99 us | mean us | / echo "
      "p50 / p99 |\n|---|---|---|---|---|---|\n",
      n);
  row("bare gRPC echo to another process", samples[kEcho]);
  row("bare ClusterService.Barrier on the coordinator", samples[kBarrier]);
  row("plain upload to the caller's own daemon (no commit)", samples[kUpload]);
  row("process-local upload + commit, per call", samples[kCommit]);
  row("process-local commit, first call to last return", all_committed);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Cross-node Place throughput
// ---------------------------------------------------------------------------

absl::Status RunPlace(const Cluster& cluster, const std::string& echo_address, const Settings& s) {
  auto mesh_a = cluster.Mesh(cluster.DevicesOf(0, 1));
  auto mesh_b = cluster.Mesh(cluster.DevicesOf(1, 1));
  if (!mesh_a.ok()) return mesh_a.status();
  if (!mesh_b.ok()) return mesh_b.status();
  const int64_t bytes = s.place_bytes;
  const int64_t count = bytes / 4;
  std::printf(
      "\n## Cross-node Place (daemon 0's %d device(s) -> daemon 1's, P('data'), %lld MiB, "
      "called on daemon 0) vs a bare gRPC byte stream to another process (%lld-byte chunks)\n\n",
      s.devices_per_process, static_cast<long long>(bytes >> 20),
      static_cast<long long>(s.chunk_bytes));
  pc::TensorClient tensors(*cluster.clients[0]);
  std::vector<float> host(static_cast<size_t>(count), 1.0f);
  pc::UploadOptions upload;
  upload.path = pc::TransferPath::kStream;
  auto source = tensors.Upload(pc::HostArray::Of(host, {count}),
                               pc::Placement::Sharded(*mesh_a, {{"data"}}), upload);
  if (!source.ok()) return source.status();
  auto echo = v1::EchoService::NewStub(Dial(echo_address));
  std::vector<char> sink_buffer(static_cast<size_t>(bytes));

  auto place = [&]() -> absl::StatusOr<double> {
    const absl::Time start = absl::Now();
    auto moved = tensors.Place(source->id, pc::Placement::Sharded(*mesh_b, {{"data"}}));
    const double t = Seconds(absl::Now() - start);
    if (!moved.ok()) return moved.status();
    if (absl::Status st = tensors.Delete({moved->id}).status(); !st.ok()) return st;
    return t;
  };
  auto sink = [&]() -> absl::StatusOr<double> {
    const absl::Time start = absl::Now();
    grpc::ClientContext context;
    v1::SinkSummary summary;
    auto writer = echo->Sink(&context, &summary);
    v1::EchoMessage message;
    const char* src = reinterpret_cast<const char*>(host.data());
    for (int64_t off = 0; off < bytes; off += s.chunk_bytes) {
      message.mutable_payload()->assign(src + off, std::min(s.chunk_bytes, bytes - off));
      if (!writer->Write(message)) break;
    }
    writer->WritesDone();
    absl::Status st = FromGrpc(writer->Finish(), "sink");
    if (st.ok() && summary.total_bytes() != bytes) st = absl::DataLossError("sink: short");
    if (!st.ok()) return st;
    return Seconds(absl::Now() - start);
  };
  auto source_stream = [&]() -> absl::StatusOr<double> {
    const absl::Time start = absl::Now();
    grpc::ClientContext context;
    v1::SourceRequest request;
    request.set_total_bytes(bytes);
    request.set_chunk_bytes(s.chunk_bytes);
    auto reader = echo->Source(&context, request);
    v1::EchoMessage message;
    int64_t off = 0;
    while (reader->Read(&message)) {
      std::memcpy(sink_buffer.data() + off, message.payload().data(), message.payload().size());
      off += static_cast<int64_t>(message.payload().size());
    }
    absl::Status st = FromGrpc(reader->Finish(), "source");
    if (st.ok() && off != bytes) st = absl::DataLossError("source: short");
    if (!st.ok()) return st;
    return Seconds(absl::Now() - start);
  };
  const std::vector<std::pair<const char*, std::function<absl::StatusOr<double>()>>> kinds = {
      {"bare gRPC client stream (Sink)", sink},
      {"bare gRPC server stream (Source)", source_stream},
      {"Place, daemon 0 -> daemon 1", place}};
  std::vector<std::vector<double>> gbs(kinds.size());
  for (int rep = -1; rep < s.place_reps; ++rep) {  // rep -1 warms up
    for (size_t j = 0; j < kinds.size(); ++j) {
      auto t = kinds[j].second();
      if (!t.ok()) return t.status();
      if (rep >= 0) gbs[j].push_back(bytes / *t / 1e9);
    }
  }
  if (absl::Status st = tensors.Delete({source->id}).status(); !st.ok()) return st;
  const double base = Median(gbs[0]);
  std::printf("| measurement | best GB/s | median GB/s | / client stream (median) |\n");
  std::printf("|---|---|---|---|\n");
  for (size_t j = 0; j < kinds.size(); ++j) {
    std::printf("| %s | %.3f | %.3f | %.2f |\n", kinds[j].first,
                *std::max_element(gbs[j].begin(), gbs[j].end()), Median(gbs[j]),
                Median(gbs[j]) / base);
  }
  return absl::OkStatus();
}

int Run(int argc, char** argv) {
  const Settings s = FromFlags();
  // Children first: nothing gRPC may exist in this process when it forks.
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
  auto daemons = ClusterDaemons::Start(options);
  if (!daemons.ok()) {
    std::fprintf(stderr, "cluster: %s\n", daemons.status().ToString().c_str());
    return 1;
  }
  Cluster cluster;
  cluster.daemons = daemons->get();
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
  absl::ParseCommandLine(argc, argv);
  placement::server::SetLogLevel(placement::server::LogLevel::kWarning);
  return placement::bench::Run(argc, argv);
}
