// Tensor upload / download / reshard throughput through the whole stack
// (client library -> gRPC -> daemon handlers -> tensor store -> CPU
// backend), against baselines measured in the same process and run:
//   * a bare gRPC byte stream (bench EchoService Sink / Source) on the same
//     transport with the same chunk size -- the client copies chunks from
//     and into the same host buffers as ours does;
//   * host memcpy of the same bytes (the physical limit).
// Region rows: the same transfers through a same-host shared-memory region
// (the bytes already in the region; and kAuto, which now writes uploads of
// 1 MiB or more in place and copies other caller memory into a pooled
// region first), and uploads written in place (kInPlace: one copy, by the
// client, into the daemon's memory), against the same baselines.
// View rows (CPU): the time to a readable zero-copy view of a tensor from 1
// MiB to --view_max_mib, and a view + one full read against a region
// download + the same read and a gRPC download + the same read
// (bench/view_rows.h).
// Reshard (Place P('data', None) -> P(None, 'data'), and -> replicated)
// is compared with memcpy of the bytes it moves. A memcpy into freshly
// allocated pages is printed too: the CPU backend allocates new buffers for
// every upload and reshard, so their bytes land on pages faulted in on first
// touch, and that is the limit those paths can reach.
//
//   build/bin/tensor_transfer_bench [--size_mib=256] [--reps=5]
//       [--chunk_bytes=1048576] [--devices=8] [--transport=tcp|unix]
//       [--backend=cpu|cuda] [--view_max_mib=1024] [--only_views]
//
// --backend=cuda: the daemon runs on GPU 0 (--devices logical devices of
// it), and the same run also times cudaMemcpy host <-> device from pinned
// and from pageable memory, printing ours / cudaMemcpy ratios.
//
// Prints best and median MB/s (1 MB = 1e6 bytes) and the ratios
// ours / bare gRPC and ours / memcpy. Measurements of one kind are
// interleaved with their baseline rep by rep so machine noise hits both.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "bench/view_rows.h"
#include "common/lock_order_checks.h"
#include "placement/client/placement.h"
#include "placement/v1/daemon_service.grpc.pb.h"
#include "server/daemon.h"
#if PLACEMENT_WITH_CUDA
#include "bench/cuda_copy.h"
#endif

ABSL_FLAG(int64_t, size_mib, 256, "Tensor size in MiB (f32).");
ABSL_FLAG(int, reps, 5, "Repetitions of every measurement.");
ABSL_FLAG(int64_t, chunk_bytes, int64_t{1} << 20, "Stream chunk size, both ours and bare.");
ABSL_FLAG(int, devices, 8, "CPU virtual devices (the sharded cases use all of them).");
ABSL_FLAG(std::string, transport, "tcp", "tcp (127.0.0.1:0) or unix (a socket in /tmp).");
ABSL_FLAG(std::string, backend, "cpu", "cpu (virtual devices) or cuda (logical devices of GPU 0).");
ABSL_FLAG(int64_t, view_max_mib, 1024,
          "Largest tensor of the time-to-view sweep (1 MiB, 4 MiB, ... up to this); 0 skips the "
          "view rows.");
ABSL_FLAG(bool, only_views, false,
          "Run only the view rows (time to a view; view + read against the region and gRPC "
          "downloads).");
ABSL_FLAG(bool, reshard_replicated, true,
          "Also time P('data') -> replicated (moves devices x size bytes).");

namespace placement::bench {
namespace {

struct Series {
  std::string label;
  int64_t bytes_per_rep = 0;
  std::vector<absl::Duration> samples;

  double Rate(absl::Duration d) const { return bytes_per_rep / absl::ToDoubleSeconds(d) / 1e6; }
  double Best() const { return Rate(*std::min_element(samples.begin(), samples.end())); }
  double Median() const {
    std::vector<absl::Duration> s = samples;
    std::sort(s.begin(), s.end());
    return Rate(s[s.size() / 2]);
  }
};

bool Check(const absl::Status& status, const std::string& what) {
  if (status.ok()) return true;
  std::fprintf(stderr, "%s: %s\n", what.c_str(), status.ToString().c_str());
  return false;
}

// Times `fn` (which returns false on failure) and appends the sample.
bool Measure(Series* series, const std::function<bool()>& fn) {
  absl::Time start = absl::Now();
  if (!fn()) return false;
  series->samples.push_back(absl::Now() - start);
  return true;
}

void Print(const Series& s, const Series* bare, const Series& memcpy_series) {
  std::string line = absl::StrFormat("%-44s %9.0f %9.0f", s.label, s.Best(), s.Median());
  if (bare != nullptr) {
    absl::StrAppend(&line, absl::StrFormat("   ours/bare %.2f (median %.2f)",
                                           s.Best() / bare->Best(), s.Median() / bare->Median()));
  }
  if (&s != &memcpy_series) {
    absl::StrAppend(&line,
                    absl::StrFormat("   ours/memcpy %.3f", s.Median() / memcpy_series.Median()));
  }
  std::printf("%s\n", line.c_str());
}

// DaemonService.TrimMemory: every cached device block goes back, so the next
// allocation gets fresh memory.
absl::Status TrimMemory(::placement::v1::DaemonService::Stub& stub) {
  grpc::ClientContext context;
  ::placement::v1::TrimMemoryRequest request;
  ::placement::v1::TrimMemoryResponse response;
  grpc::Status status = stub.TrimMemory(&context, request, &response);
  return status.ok() ? absl::OkStatus()
                     : absl::InternalError(absl::StrCat("TrimMemory: ", status.error_message()));
}

int Run() {
  const int64_t bytes = absl::GetFlag(FLAGS_size_mib) << 20;
  const int64_t elements = bytes / 4;
  const int64_t chunk = absl::GetFlag(FLAGS_chunk_bytes);
  const int reps = std::max(1, absl::GetFlag(FLAGS_reps));
  const int devices = absl::GetFlag(FLAGS_devices);
  const bool is_unix = absl::GetFlag(FLAGS_transport) == "unix";

  std::string dir =
      std::filesystem::temp_directory_path() / absl::StrCat("placement-transfer-bench-", getpid());
  std::filesystem::create_directories(dir);
  server::DaemonConfig config;
  config.listen = is_unix ? absl::StrCat("unix:", dir, "/placementd.sock") : "127.0.0.1:0";
  config.backend.kind = absl::GetFlag(FLAGS_backend);
  // Room for the source, a reshard destination or a replicated copy, and an
  // automatically placed upload (with --devices=1 all three share device 0).
  const int64_t view_max = absl::GetFlag(FLAGS_view_max_mib) << 20;
  server::RequestDevicesEverywhere({devices, std::max(3 * bytes, view_max) + (int64_t{64} << 20)},
                                   &config.backend.platforms);
  const bool on_gpu = config.backend.kind == "cuda";
  auto daemon = server::Daemon::Start(config);
  if (!daemon.ok()) return Check(daemon.status(), "daemon") ? 0 : 1;
  EchoServiceImpl echo_service;
  std::string echo_address;
  auto echo_server = StartEchoServer(
      &echo_service, is_unix ? absl::StrCat("unix:", dir, "/echo.sock") : "127.0.0.1:0",
      &echo_address);

  client::ClientOptions options;
  options.default_deadline = absl::Minutes(10);
  auto client = client::Client::Connect((*daemon)->address(), options);
  if (!client.ok()) return Check(client.status(), "connect") ? 0 : 1;
  // The bare channel gets the same arguments as the client's.
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  args.SetMaxSendMessageSize(options.max_send_message_bytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_time)));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_timeout)));
  auto daemon_stub = ::placement::v1::DaemonService::NewStub(
      grpc::CreateChannel((*daemon)->address(), grpc::InsecureChannelCredentials()));
  auto echo_stub = v1::EchoService::NewStub(
      grpc::CreateCustomChannel(echo_address, grpc::InsecureChannelCredentials(), args));

  client::TensorClient tensors(**client);
  client::MeshClient meshes(**client);
  auto mesh = meshes.CreateDataParallel(devices, "data");
  if (!mesh.ok()) return Check(mesh.status(), "mesh") ? 0 : 1;

  if (absl::GetFlag(FLAGS_only_views)) {
    const bool ok = on_gpu || RunViewRows({.client = client->get(),
                                           .mesh = &*mesh,
                                           .bytes = bytes,
                                           .max_view_bytes = view_max,
                                           .reps = reps});
    echo_server->Shutdown();
    (*daemon)->Drain();
    std::filesystem::remove_all(dir);
    return ok ? 0 : 1;
  }

  std::vector<uint8_t> src(bytes), dst(bytes);
  for (int64_t i = 0; i < bytes; i += 4096) src[i] = static_cast<uint8_t>(i >> 12);
  std::memset(dst.data(), 1, dst.size());  // touch every page once
  client::HostArray array{client::DType::kF32, {elements}, src};
  client::UploadOptions upload;
  upload.chunk_bytes = chunk;
  upload.path = client::TransferPath::kStream;  // the "ours" rows are the gRPC stream
  client::DownloadOptions download;
  download.chunk_bytes = chunk;
  download.path = client::TransferPath::kStream;
  // Same-host regions (docs/api/regions.md): the caller's bytes already sit
  // in a region (UploadFromRegion / DownloadToRegion), and the automatic path
  // that stages caller memory through a pooled region.
  client::UploadOptions auto_upload;
  auto_upload.path = client::TransferPath::kAuto;
  client::DownloadOptions auto_download;
  auto_download.path = client::TransferPath::kAuto;
  client::UploadOptions in_place;
  in_place.path = client::TransferPath::kInPlace;
  client::DownloadOptions read_in_place;
  read_in_place.path = client::TransferPath::kInPlace;
  auto region_in = client::SharedRegion::Create(**client, bytes, "bench-in");
  if (!Check(region_in.status(), "region")) return 1;
  auto region_out = client::SharedRegion::Create(**client, bytes, "bench-out");
  if (!Check(region_out.status(), "region")) return 1;
  std::memcpy((*region_in)->data(), src.data(), bytes);
  std::memset((*region_out)->data(), 1, bytes);  // touched, like dst

  Series copy{"memcpy (host, same bytes)", bytes};
  // What the CPU backend's buffers start as: fresh pages, faulted in on
  // first touch (aligned_alloc of a large block maps new memory).
  Series fresh{"memcpy into freshly allocated pages", bytes};
  Series bare_up{"upload   bare gRPC byte stream", bytes};
  Series up_one{"upload   ours, 1 device", bytes};
  Series up_eight{absl::StrCat("upload   ours, P('data') over ", devices, " devices"), bytes};
  Series bare_down{"download bare gRPC byte stream", bytes};
  Series down_one{"download ours, 1 device", bytes};
  Series down_eight{absl::StrCat("download ours, P('data') over ", devices, " devices"), bytes};
  Series up_region_one{"upload   region, 1 device", bytes};
  Series up_region_eight{absl::StrCat("upload   region, P('data') over ", devices, " devices"),
                         bytes};
  // kAuto writes in place on the CPU platform and stages through a pooled
  // region on a GPU one (which does not hand out device memory).
  const char* auto_path = on_gpu ? "staged region" : "in place";
  Series up_auto{absl::StrCat("upload   auto (", auto_path, "), P('data') x", devices), bytes};
  // Written straight into the daemon's memory: one copy by the client, into
  // the block the previous rep's tensor freed (docs/api/views.md).
  Series up_in_place{"upload   in place, 1 device", bytes};
  // The same into a memory file nobody used before (the tenant's cached
  // blocks trimmed first, untimed): the daemon makes the file without pages
  // and the client fills it (FillFreshFile) -- against memcpy into fresh
  // pages.
  Series up_in_place_cold{"upload   in place, 1 device, fresh memory", bytes};
  // The next upload, into the block the fresh one filled: the client maps
  // the part of it the fill wrote through the fd, once (after it, the
  // warm row's steady state).
  Series up_in_place_reuse{"upload   in place, 1 device, first reuse", bytes};
  Series down_region_one{"download region, 1 device", bytes};
  Series down_region_eight{absl::StrCat("download region, P('data') over ", devices, " devices"),
                           bytes};
  Series down_auto{absl::StrCat("download auto (", auto_path, "), P('data') x", devices), bytes};
  Series down_in_place{"download in place, 1 device", bytes};
  Series reshard{"reshard  P('data',None) -> P(None,'data')", bytes};
  Series replicate{absl::StrCat("reshard  P('data') -> replicated (", devices, "x bytes)"),
                   bytes * devices};

  auto bare_upload = [&] {
    grpc::ClientContext context;
    v1::SinkSummary summary;
    auto writer = echo_stub->Sink(&context, &summary);
    v1::EchoMessage message;
    for (int64_t off = 0; off < bytes; off += chunk) {
      int64_t n = std::min(chunk, bytes - off);
      message.mutable_payload()->assign(reinterpret_cast<const char*>(src.data() + off), n);
      if (!writer->Write(message)) break;
    }
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    return status.ok() && summary.total_bytes() == bytes;
  };
  auto bare_download = [&] {
    grpc::ClientContext context;
    v1::SourceRequest request;
    request.set_total_bytes(bytes);
    request.set_chunk_bytes(chunk);
    auto reader = echo_stub->Source(&context, request);
    v1::EchoMessage message;
    int64_t off = 0;
    while (reader->Read(&message)) {
      std::memcpy(dst.data() + off, message.payload().data(), message.payload().size());
      off += static_cast<int64_t>(message.payload().size());
    }
    return reader->Finish().ok() && off == bytes;
  };
  auto upload_to = [&](const client::Rule& rule, std::string* id) {
    auto info = tensors.Upload(array, rule, upload);
    if (!Check(info.status(), "upload")) return false;
    *id = info->id;
    return true;
  };
  auto upload_region = [&](const client::Rule& rule, std::string* id) {
    auto info = tensors.UploadFromRegion(**region_in, 0, client::DType::kF32, {elements}, rule);
    if (!Check(info.status(), "region upload")) return false;
    *id = info->id;
    return true;
  };
  auto download_region = [&](const std::string& id) {
    return Check(tensors.DownloadToRegion(id, **region_out, 0).status(), "region download");
  };
  auto remove = [&](const std::string& id) {
    return Check(tensors.Delete({id}).status(), "delete");
  };
  auto download_from = [&](const std::string& id) {
    return Check(
        tensors.Download(id, absl::MakeSpan(dst), client::DownloadSelection::Whole(), download)
            .status(),
        "download");
  };

#if PLACEMENT_WITH_CUDA
  std::unique_ptr<CudaCopy> cuda;
  if (on_gpu) {
    auto made = CudaCopy::Create(bytes);
    if (!Check(made.status(), "cuda baseline")) return 1;
    cuda = std::move(*made);
  }
#else
  if (on_gpu) return Check(absl::FailedPreconditionError("built without CUDA"), "backend") ? 0 : 1;
#endif
  Series h2d_pinned{"cudaMemcpy H2D from pinned", bytes};
  Series h2d_pageable{"cudaMemcpy H2D from pageable", bytes};
  Series d2h_pinned{"cudaMemcpy D2H to pinned", bytes};
  Series d2h_pageable{"cudaMemcpy D2H to pageable", bytes};

  const client::Placement one = client::Placement::Device(0);
  const client::Placement eight = client::Placement::Sharded(*mesh, {{"data"}});
  // The in-place rows of one rep: warm, the download back, then a fresh
  // memory file (the tenant's cached blocks trimmed untimed) and its first reuse.
  auto in_place_rows = [&] {
    std::string a;
    bool ok = Measure(&up_in_place, [&] {
      auto info = tensors.Upload(array, one, in_place);
      if (!Check(info.status(), "in-place upload")) return false;
      a = info->id;
      return true;
    });
    ok = ok && Measure(&down_in_place, [&] {
           return Check(tensors
                            .Download(a, absl::MakeSpan(dst), client::DownloadSelection::Whole(),
                                      read_in_place)
                            .status(),
                        "in-place download");
         });
    ok = ok && std::memcmp(dst.data(), src.data(), bytes) == 0 && remove(a);
    ok = ok && Check(TrimMemory(*daemon_stub), "trim") && Measure(&up_in_place_cold, [&] {
           auto info = tensors.Upload(array, one, in_place);
           if (!Check(info.status(), "cold in-place upload")) return false;
           a = info->id;
           return true;
         });
    ok = ok && remove(a) && Measure(&up_in_place_reuse, [&] {
           auto info = tensors.Upload(array, one, in_place);
           if (!Check(info.status(), "in-place upload after a fresh one")) return false;
           a = info->id;
           return true;
         });
    return ok && remove(a);
  };
  for (int rep = 0; rep < reps; ++rep) {
    std::string a, b;
    bool ok = Measure(&copy, [&] {
      std::memcpy(dst.data(), src.data(), bytes);
      return true;
    });
    ok = ok && Measure(&fresh, [&] {
           void* block = std::aligned_alloc(64, static_cast<size_t>((bytes + 63) / 64 * 64));
           if (block == nullptr) return false;
           std::memcpy(block, src.data(), bytes);
           asm volatile("" : : "r"(block) : "memory");  // keep the copy
           std::free(block);
           return true;
         });
#if PLACEMENT_WITH_CUDA
    if (cuda != nullptr) {
      ok = ok && Measure(&h2d_pinned, [&] { return cuda->HostToDevicePinned(); });
      ok = ok && Measure(&h2d_pageable, [&] { return cuda->HostToDevice(src.data()); });
      ok = ok && Measure(&d2h_pinned, [&] { return cuda->DeviceToHostPinned(); });
      ok = ok && Measure(&d2h_pageable, [&] { return cuda->DeviceToHost(dst.data()); });
    }
#endif
    ok = ok && Measure(&bare_up, bare_upload);
    ok = ok && Measure(&up_one, [&] { return upload_to(one, &a); });
    ok = ok && Measure(&up_eight, [&] { return upload_to(eight, &b); });
    ok = ok && Measure(&bare_down, bare_download);
    ok = ok && Measure(&down_one, [&] { return download_from(a); });
    ok = ok && Measure(&down_eight, [&] { return download_from(b); });
    ok = ok && std::memcmp(dst.data(), src.data(), bytes) == 0 && remove(a) && remove(b);
    // A GPU platform does not hand out device memory for writing in place
    // (kInPlace is UNIMPLEMENTED there): no in-place rows.
    ok = ok && (on_gpu || in_place_rows());
    std::string c, d, e;
    ok = ok && Measure(&up_region_one, [&] { return upload_region(one, &c); });
    ok = ok && Measure(&up_region_eight, [&] { return upload_region(eight, &d); });
    ok = ok && Measure(&up_auto, [&] {
           auto info = tensors.Upload(array, eight, auto_upload);
           if (!Check(info.status(), "auto upload")) return false;
           e = info->id;
           return true;
         });
    ok = ok && Measure(&down_region_one, [&] { return download_region(c); });
    ok = ok && Measure(&down_region_eight, [&] { return download_region(d); });
    ok = ok && std::memcmp((*region_out)->data(), src.data(), bytes) == 0;
    ok = ok && Measure(&down_auto, [&] {
           return Check(tensors
                            .Download(e, absl::MakeSpan(dst), client::DownloadSelection::Whole(),
                                      auto_download)
                            .status(),
                        "auto download");
         });
    ok = ok && std::memcmp(dst.data(), src.data(), bytes) == 0 && remove(c) && remove(d) &&
         remove(e);
    if (!ok) {
      std::fprintf(stderr, "rep %d failed\n", rep);
      return 1;
    }
  }

  // Reshard needs a 2-D tensor: [devices * 16, rest].
  const int64_t rows = int64_t{16} * devices;
  client::HostArray matrix{client::DType::kF32, {rows, elements / rows}, src};
  auto source = tensors.Upload(matrix, client::Placement::Sharded(*mesh, {{"data"}, {}}), upload);
  if (!Check(source.status(), "upload matrix")) return 1;
  for (int rep = 0; rep < reps; ++rep) {
    std::string id;
    bool ok = Measure(&reshard, [&] {
      auto placed = tensors.Place(source->id, client::Placement::Sharded(*mesh, {{}, {"data"}}));
      if (!Check(placed.status(), "reshard")) return false;
      id = placed->id;
      return true;
    });
    ok = ok && remove(id);
    if (ok && absl::GetFlag(FLAGS_reshard_replicated)) {
      ok = Measure(&replicate, [&] {
        auto placed = tensors.Place(source->id, client::Placement::Replicated(*mesh));
        if (!Check(placed.status(), "replicate")) return false;
        id = placed->id;
        return true;
      });
      ok = ok && remove(id);
    }
    if (!ok) return 1;
  }
  remove(source->id);

  std::printf("tensor transfer: %lld MiB f32, chunk %lld bytes, %d reps, %d %s devices, %s\n",
              static_cast<long long>(bytes >> 20), static_cast<long long>(chunk), reps, devices,
              on_gpu ? "GPU (logical)" : "CPU", is_unix ? "unix socket" : "tcp 127.0.0.1");
  std::printf("%-44s %9s %9s   (MB/s, 1 MB = 1e6 B; ratios of best, then of medians)\n", "", "best",
              "median");
  Print(copy, nullptr, copy);
  Print(fresh, nullptr, copy);
  Print(bare_up, nullptr, copy);
  Print(up_one, &bare_up, copy);
  Print(up_eight, &bare_up, copy);
  Print(bare_down, nullptr, copy);
  Print(down_one, &bare_down, copy);
  Print(down_eight, &bare_down, copy);
  Print(up_region_one, &bare_up, copy);
  Print(up_region_eight, &bare_up, copy);
  Print(up_auto, &bare_up, copy);
  if (!on_gpu) {
    Print(up_in_place, &bare_up, copy);
    std::printf("%-44s %9.0f %9.0f   ours/fresh-pages memcpy %.2f (median %.2f)\n",
                up_in_place_cold.label.c_str(), up_in_place_cold.Best(), up_in_place_cold.Median(),
                up_in_place_cold.Best() / fresh.Best(), up_in_place_cold.Median() / fresh.Median());
    Print(up_in_place_reuse, &bare_up, copy);
  }
  Print(down_region_one, &bare_down, copy);
  Print(down_region_eight, &bare_down, copy);
  Print(down_auto, &bare_down, copy);
  if (!on_gpu) Print(down_in_place, &bare_down, copy);
  Print(reshard, nullptr, copy);
  if (!replicate.samples.empty()) Print(replicate, nullptr, copy);
  if (!h2d_pinned.samples.empty()) {
    for (const Series* s : {&h2d_pinned, &h2d_pageable, &d2h_pinned, &d2h_pageable}) {
      Print(*s, nullptr, copy);
    }
    std::printf("upload ours, 1 device / cudaMemcpy H2D: pinned %.3f, pageable %.3f (medians)\n",
                up_one.Median() / h2d_pinned.Median(), up_one.Median() / h2d_pageable.Median());
    std::printf("download ours, 1 device / cudaMemcpy D2H: pinned %.3f, pageable %.3f (medians)\n",
                down_one.Median() / d2h_pinned.Median(), down_one.Median() / d2h_pageable.Median());
  }

  if (!on_gpu && view_max > 0 &&
      !RunViewRows({.client = client->get(),
                    .mesh = &*mesh,
                    .bytes = bytes,
                    .max_view_bytes = view_max,
                    .reps = reps})) {
    return 1;
  }

  region_in->reset();
  region_out->reset();
  echo_server->Shutdown();
  (*daemon)->Drain();
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace placement::bench

int main(int argc, char** argv) {
  placement::SkipLockOrderChecksInRelease();
  absl::ParseCommandLine(argc, argv);
  return placement::bench::Run();
}
