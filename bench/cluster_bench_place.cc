// cluster_bench: cross-node Place throughput (see cluster_bench.cc for the method).
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

}  // namespace placement::bench
