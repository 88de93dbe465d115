// All-reduce (SUM, f32, in place) of 1 KiB .. 256 MiB per device on 8 CPU
// virtual devices, reported as nccl-tests does: algbw = bytes / time and
// busbw = algbw * 2(n-1)/n. Measured in the same run on the same machine:
//
//   local     LocalEngine called directly on CpuBackend buffers;
//   rpc       the same collective through placementd's CollectiveService
//             (an in-process Daemon, a real gRPC client, DONATE = in place);
//   ring, hd  Gloo's own AllreduceRing / AllreduceHalvingDoubling over the
//             same buffers, 8 ranks in this process over loopback TCP;
//   memcpy    the machine's copy bandwidth (1 thread and as many threads as
//             the engine uses), the ceiling for any shared-memory algorithm.
//
// Ratios printed (a markdown table): busbw / memcpy bandwidth; mem-eff =
// n * bytes / time / memcpy bandwidth -- an n-rank shared-memory all-reduce
// must read every rank's buffer once and write every rank's result once,
// i.e. "copy" n buffers, so 1.0 means as fast as memcpy copying the same
// bytes; ring / local and hd / local time (our speed-up over Gloo); rpc /
// local time (the RPC path's overhead over the direct engine call).
//
// With CUDA and a GPU present it also times placementd's NCCL all-reduce
// through the RPC against a direct ncclAllReduce on buffers of the same size.
//
//   build/bin/collective_bench [--max_bytes=268435456] [--gloo_max_bytes=...]
#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/lock_order_checks.h"
#include "placement/client/collectives.h"
#include "placement/client/placement.h"
#include "server/collective/local/local_engine.h"
#include "server/daemon.h"
#include "server/logging.h"
#include "server/platform/cpu/cpu_backend.h"

#if PLACEMENT_WITH_GLOO
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>

#include "bench/gloo_ranks.h"
#include "server/collective/transport/rendezvous_store.h"
#endif
#if PLACEMENT_WITH_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "server/platform/cuda/cuda_backend.h"
#endif

ABSL_FLAG(int64_t, min_bytes, 1 << 10, "Smallest per-device size.");
ABSL_FLAG(int64_t, max_bytes, 256 << 20, "Largest per-device size (x4 steps).");
ABSL_FLAG(int64_t, gloo_max_bytes, 256 << 20, "Largest size for the Gloo baselines.");
ABSL_FLAG(int, devices, 8, "CPU virtual devices (ranks).");
ABSL_FLAG(int, min_time_ms, 300, "Timed time per measurement (at least 2 iterations).");
ABSL_FLAG(int, max_iters, 500, "Most timed iterations per measurement.");
ABSL_FLAG(int, engine_threads, -1, "LocalEngine pool threads besides the caller (-1: default).");
ABSL_FLAG(bool, rpc, true, "Measure the RPC path through an in-process daemon.");
ABSL_FLAG(bool, gloo, true, "Measure the Gloo baselines.");

namespace placement::bench {
namespace {

namespace pc = placement::client;
using server::CollectiveItem;

struct Row {
  int64_t bytes = 0;
  double local = 0, rpc = 0, ring = 0, hd = 0;  // seconds per iteration (0: not measured)
};

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// Mean seconds per call of fn() after one warm-up call: at least 2 calls,
// until min_time has passed or max_iters calls.
template <typename Fn>
double TimeIt(Fn&& fn) {
  fn();
  const absl::Duration min_time = absl::Milliseconds(absl::GetFlag(FLAGS_min_time_ms));
  const int max_iters = absl::GetFlag(FLAGS_max_iters);
  int iters = 0;
  const absl::Time start = absl::Now();
  absl::Duration elapsed;
  do {
    fn();
    ++iters;
    elapsed = absl::Now() - start;
  } while (iters < max_iters && (iters < 2 || elapsed < min_time));
  return Seconds(elapsed) / iters;
}

// memcpy bandwidth (bytes copied per second) with `threads` threads each
// copying its slice of a `bytes` buffer.
double MemcpyBandwidth(int64_t bytes, int threads) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const int64_t slice = bytes / threads;
  const double t = TimeIt([&] {
    std::vector<std::thread> pool;
    for (int i = 1; i < threads; ++i) {
      pool.emplace_back(
          [&, i] { std::memcpy(dst.data() + i * slice, src.data() + i * slice, slice); });
    }
    std::memcpy(dst.data(), src.data(), slice);
    for (auto& th : pool) th.join();
  });
  return static_cast<double>(slice * threads) / t;
}

// One zero-filled buffer per device (zeros keep repeated in-place sums finite).
std::vector<std::unique_ptr<server::DeviceBuffer>> ZeroBuffers(server::CpuBackend* backend, int n,
                                                               int64_t bytes) {
  std::vector<std::unique_ptr<server::DeviceBuffer>> out;
  for (int d = 0; d < n; ++d) {
    out.push_back(*backend->Allocate(d, bytes));
    std::memset(out.back()->data(), 0, bytes);
  }
  return out;
}

#if PLACEMENT_WITH_GLOO
// Runs Gloo's algorithm `Algo` on every rank in its own thread over
// `buffers`; returns mean seconds per all-reduce.
template <template <typename> class Algo>
double TimeGloo(const std::vector<std::shared_ptr<gloo::Context>>& ranks,
                const std::vector<std::unique_ptr<server::DeviceBuffer>>& buffers) {
  const int n = static_cast<int>(ranks.size());
  const int count = static_cast<int>(buffers[0]->size() / sizeof(float));
  std::barrier sync(n);
  std::atomic<int> iters{1};
  double seconds = 0;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float*> ptrs = {static_cast<float*>(buffers[r]->data())};
      Algo<float> algorithm(ranks[r], ptrs, count);
      algorithm.run();  // warm-up
      sync.arrive_and_wait();
      absl::Time start = absl::Now();
      algorithm.run();
      sync.arrive_and_wait();
      if (r == 0) {
        const double first = Seconds(absl::Now() - start);
        const double budget = absl::GetFlag(FLAGS_min_time_ms) / 1e3;
        iters = std::clamp(static_cast<int>(budget / std::max(first, 1e-9)), 1,
                           absl::GetFlag(FLAGS_max_iters));
      }
      sync.arrive_and_wait();
      start = absl::Now();
      for (int i = 0; i < iters; ++i) algorithm.run();
      sync.arrive_and_wait();
      if (r == 0) seconds = Seconds(absl::Now() - start) / iters;
    });
  }
  for (auto& t : threads) t.join();
  return seconds;
}

std::vector<std::shared_ptr<gloo::Context>> ConnectGloo(server::RendezvousStore* store, int n) {
  auto contexts = bench::ConnectGlooContexts(store, n, "bench", absl::Seconds(600));
  if (!contexts.ok()) return {};
  return *std::move(contexts);
}
#endif  // PLACEMENT_WITH_GLOO

// The RPC path: a partial tensor over `mesh`'s only axis, all-reduced in
// place (DONATE) per timed call. Between calls, untimed, the replicated
// result is turned back into a partial tensor by moving its buffers
// (Disassemble + Assemble with donation: no bytes are copied).
class RpcRunner {
 public:
  RpcRunner(const pc::Client& client, pc::Mesh mesh)
      : tensors_(client), collectives_(client), mesh_(std::move(mesh)) {}

  absl::StatusOr<double> Time(int64_t bytes) {
    const int n = mesh_.device_ids.size();
    std::vector<float> zeros(bytes / sizeof(float), 0.0f);
    std::vector<std::string> ids;
    for (int d = 0; d < n; ++d) {
      auto piece = tensors_.Upload(pc::HostArray::Of(zeros, {static_cast<int64_t>(zeros.size())}),
                                   pc::Placement::Device(mesh_.device_ids[d]));
      if (!piece.ok()) return piece.status();
      ids.push_back(piece->id);
    }
    absl::Status failure;
    std::string id;
    auto repartition = [&](const std::vector<std::string>& pieces) {
      auto partial = tensors_.Assemble({static_cast<int64_t>(zeros.size())},
                                       pc::Placement::Sharded(mesh_, {}).WithPartial({"data"}),
                                       pieces, pc::SourceHandling::kDonate);
      if (!partial.ok()) failure = partial.status();
      if (partial.ok()) id = partial->id;
    };
    repartition(ids);
    double total = 0;
    int iters = 0;
    const double budget = absl::GetFlag(FLAGS_min_time_ms) / 1e3;
    for (int i = -1;
         failure.ok() && i < absl::GetFlag(FLAGS_max_iters) && (i < 2 || total < budget); ++i) {
      const absl::Time start = absl::Now();
      auto reduced = collectives_.AllReduce(
          id, pc::ReduceOp::kSum, {.axes = {"data"}, .source = pc::SourceHandling::kDonate});
      const double t = Seconds(absl::Now() - start);
      if (!reduced.ok()) return reduced.status();
      if (i >= 0) {  // i == -1 is the warm-up
        total += t;
        ++iters;
      }
      auto pieces = tensors_.Disassemble(reduced->id, pc::SourceHandling::kDonate);
      if (!pieces.ok()) return pieces.status();
      std::vector<std::string> piece_ids;
      for (const auto& p : *pieces) piece_ids.push_back(p.id);
      repartition(piece_ids);
    }
    if (!failure.ok()) return failure;
    if (auto deleted = tensors_.Delete({id}); !deleted.ok()) return deleted.status();
    return total / iters;
  }

 private:
  pc::TensorClient tensors_;
  pc::CollectiveClient collectives_;
  pc::Mesh mesh_;
};

// One markdown table row; "-" where a path was not measured.
void PrintRow(const Row& row, int n, double memcpy_bw) {
  const double bus = 2.0 * (n - 1) / n;
  auto alg = [&](double t) { return row.bytes / t / 1e9; };
  auto us = [](double t) { return t > 0 ? absl::StrFormat("%.1f", t * 1e6) : std::string("-"); };
  auto gbs = [](double t, double v) {
    return t > 0 ? absl::StrFormat("%.3f", v) : std::string("-");
  };
  auto ratio = [](double a, double b) {
    return a > 0 && b > 0 ? absl::StrFormat("%.2f", a / b) : std::string("-");
  };
  const std::string size = row.bytes >= (1 << 20) ? absl::StrFormat("%lld MiB", row.bytes >> 20)
                                                  : absl::StrFormat("%lld KiB", row.bytes >> 10);
  std::printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
              size.c_str(), us(row.local).c_str(), gbs(row.local, alg(row.local)).c_str(),
              gbs(row.local, alg(row.local) * bus).c_str(),
              gbs(row.local, alg(row.local) * bus * 1e9 / memcpy_bw).c_str(),
              gbs(row.local, n * row.bytes / row.local / memcpy_bw).c_str(), us(row.rpc).c_str(),
              gbs(row.rpc, alg(row.rpc) * bus).c_str(), ratio(row.rpc, row.local).c_str(),
              us(row.ring).c_str(), gbs(row.ring, alg(row.ring) * bus).c_str(), us(row.hd).c_str(),
              gbs(row.hd, alg(row.hd) * bus).c_str(), ratio(row.ring, row.local).c_str(),
              ratio(row.hd, row.local).c_str());
}

#if PLACEMENT_WITH_CUDA
// Direct ncclAllReduce (in place, SUM, f32) on every GPU against the same
// collective through placementd with the CUDA backend.
void RunNccl(const std::vector<int64_t>& sizes) {
  std::string reason;
  if (!server::CudaDevicesPresent(&reason)) {
    std::printf("\nNCCL: skipped (%s)\n", reason.c_str());
    return;
  }
  int n = 0;
  cudaGetDeviceCount(&n);
  std::vector<int> ordinals(n);
  for (int i = 0; i < n; ++i) ordinals[i] = i;
  std::vector<ncclComm_t> comms(n);
  if (ncclCommInitAll(comms.data(), n, ordinals.data()) != ncclSuccess) {
    std::printf("\nNCCL: ncclCommInitAll failed\n");
    return;
  }
  std::vector<cudaStream_t> streams(n);
  for (int i = 0; i < n; ++i) {
    cudaSetDevice(i);
    cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking);
  }
  server::DaemonConfig config;
  config.listen = "127.0.0.1:0";
  config.backend.kind = "cuda";
  auto daemon = server::Daemon::Start(config);
  if (!daemon.ok()) {
    std::printf("\nNCCL: daemon: %s\n", daemon.status().ToString().c_str());
    return;
  }
  auto client = pc::Client::Connect((*daemon)->address());
  auto mesh = pc::MeshClient(**client).CreateDataParallel(n, "data");
  if (!mesh.ok()) return;
  RpcRunner rpc(**client, *mesh);
  std::printf("\nNCCL all-reduce, %d GPU(s), f32 SUM in place\n", n);
  std::printf("%9s | %12s %8s | %12s %8s | %s\n", "size", "direct", "algbw", "rpc", "algbw",
              "rpc/direct");
  for (int64_t bytes : sizes) {
    std::vector<void*> bufs(n);
    for (int i = 0; i < n; ++i) {
      cudaSetDevice(i);
      cudaMalloc(&bufs[i], bytes);
      cudaMemset(bufs[i], 0, bytes);
    }
    const double direct = TimeIt([&] {
      ncclGroupStart();
      for (int i = 0; i < n; ++i) {
        ncclAllReduce(bufs[i], bufs[i], bytes / 4, ncclFloat32, ncclSum, comms[i], streams[i]);
      }
      ncclGroupEnd();
      for (int i = 0; i < n; ++i) {
        cudaSetDevice(i);
        cudaStreamSynchronize(streams[i]);
      }
    });
    for (int i = 0; i < n; ++i) {
      cudaSetDevice(i);
      cudaFree(bufs[i]);
    }
    auto through_rpc = rpc.Time(bytes);
    const double r = through_rpc.ok() ? *through_rpc : 0;
    std::printf("%9lld | %9.1f us %8.2f | %9.1f us %8.2f | %.2f\n", static_cast<long long>(bytes),
                direct * 1e6, bytes / direct / 1e9, r * 1e6, r > 0 ? bytes / r / 1e9 : 0,
                r > 0 ? r / direct : 0);
  }
  for (auto comm : comms) ncclCommDestroy(comm);
  (*daemon)->Drain();
}
#endif  // PLACEMENT_WITH_CUDA

int Run() {
  const int n = absl::GetFlag(FLAGS_devices);
  const int64_t max_bytes = absl::GetFlag(FLAGS_max_bytes);
  std::vector<int64_t> sizes;
  for (int64_t b = absl::GetFlag(FLAGS_min_bytes); b <= max_bytes; b *= 4) sizes.push_back(b);

  server::LocalEngineOptions engine_options;
  engine_options.num_threads = absl::GetFlag(FLAGS_engine_threads);
  server::LocalEngine engine(engine_options);
  const int engine_threads = engine.num_threads() + 1;
  const int64_t copy_bytes = std::max<int64_t>(64 << 20, std::min<int64_t>(max_bytes, 256 << 20));
  const double memcpy_1 = MemcpyBandwidth(copy_bytes, 1);
  const double memcpy_n = MemcpyBandwidth(copy_bytes, engine_threads);
  std::printf(
      "collective_bench: all-reduce f32 SUM in place, %d CPU virtual devices, %u hardware "
      "threads, engine threads %d\n",
      n, std::thread::hardware_concurrency(), engine_threads);
  const double memcpy_bw = std::max(memcpy_1, memcpy_n);
  std::printf(
      "memcpy bandwidth (%lld MiB): 1 thread %.2f GB/s, %d threads %.2f GB/s (ratios "
      "use the better, %.2f GB/s)\n\n",
      static_cast<long long>(copy_bytes >> 20), memcpy_1 / 1e9, engine_threads, memcpy_n / 1e9,
      memcpy_bw / 1e9);

  server::CpuBackendOptions backend_options;
  backend_options.num_devices = n;
  backend_options.device_memory_bytes = max_bytes + (1 << 20);
  auto backend = server::CpuBackend::Create(backend_options);
  if (!backend.ok()) return 1;

#if PLACEMENT_WITH_GLOO
  server::InMemoryRendezvousStore store;
  std::vector<std::shared_ptr<gloo::Context>> gloo_ranks;
  if (absl::GetFlag(FLAGS_gloo)) gloo_ranks = ConnectGloo(&store, n);
#endif

  std::unique_ptr<server::Daemon> daemon;
  std::unique_ptr<pc::Client> client;
  std::unique_ptr<RpcRunner> rpc;
  if (absl::GetFlag(FLAGS_rpc)) {
    server::DaemonConfig config;
    config.listen = "127.0.0.1:0";
    config.backend.kind = "cpu";
    server::RequestDevicesEverywhere({n, 2 * max_bytes + (64 << 20)}, &config.backend.platforms);
    auto started = server::Daemon::Start(config);
    if (!started.ok()) {
      std::fprintf(stderr, "daemon: %s\n", started.status().ToString().c_str());
      return 1;
    }
    daemon = std::move(*started);
    auto connected = pc::Client::Connect(daemon->address());
    if (!connected.ok()) return 1;
    client = std::move(*connected);
    auto mesh = pc::MeshClient(*client).CreateDataParallel(n, "data");
    if (!mesh.ok()) return 1;
    rpc = std::make_unique<RpcRunner>(*client, *mesh);
  }

  std::printf(
      "| per-device size | local us | local algbw GB/s | local busbw GB/s | busbw / memcpy | "
      "mem-eff | rpc us | rpc busbw GB/s | rpc / local time | gloo ring us | ring busbw GB/s | "
      "gloo hd us | hd busbw GB/s | ring / local time | hd / local time |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int64_t bytes : sizes) {
    Row row;
    row.bytes = bytes;
    {
      auto buffers = ZeroBuffers(backend->get(), n, bytes);
      std::vector<const server::DeviceBuffer*> send;
      std::vector<server::DeviceBuffer*> recv;
      for (auto& b : buffers) {
        send.push_back(b.get());
        recv.push_back(b.get());
      }
      CollectiveItem item = server::AllLocalItem(DType::kF32, ReduceOp::kSum, send, recv);
      row.local = TimeIt([&] {
        (void)engine.Run(server::CollectiveKind::kAllReduce, {&item, 1}, {});
      });
#if PLACEMENT_WITH_GLOO
      if (!gloo_ranks.empty() && bytes <= absl::GetFlag(FLAGS_gloo_max_bytes)) {
        row.ring = TimeGloo<gloo::AllreduceRing>(gloo_ranks, buffers);
        row.hd = TimeGloo<gloo::AllreduceHalvingDoubling>(gloo_ranks, buffers);
      }
#endif
    }
    if (rpc != nullptr) {
      auto t = rpc->Time(bytes);
      if (!t.ok()) {
        std::fprintf(stderr, "rpc %lld: %s\n", static_cast<long long>(bytes),
                     t.status().ToString().c_str());
      } else {
        row.rpc = *t;
      }
    }
    PrintRow(row, n, memcpy_bw);
    std::fflush(stdout);
  }
  if (daemon != nullptr) daemon->Drain();
#if PLACEMENT_WITH_CUDA
  RunNccl(sizes);
#endif
  return 0;
}

}  // namespace
}  // namespace placement::bench

int main(int argc, char** argv) {
  placement::SkipLockOrderChecksInRelease();
  absl::ParseCommandLine(argc, argv);
  placement::server::SetLogLevel(placement::server::LogLevel::kWarning);
  return placement::bench::Run();
}
