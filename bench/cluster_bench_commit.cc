// cluster_bench: multi-controller commit latency (see cluster_bench.cc for the method).
#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstring>
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

}  // namespace

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

}  // namespace placement::bench
