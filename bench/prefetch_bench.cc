// Prefetch pipeline against the serial upload-then-compute loop, in the same
// run, through an in-process daemon (127.0.0.1:0; CPU backend, or GPU 0 with
// --backend=cuda).
//
// A "trainer" takes `steps` batches and computes on each for a fixed step
// time (sleep: the host waits as it would for a GPU step; or spin). The
// step time is calibrated to the measured serial upload time of one batch
// times each --step_factors entry, so transfer and compute are comparable.
//
//   serial:   for each batch: UploadBatch (TensorService), compute, delete
//   prefetch: PrefetchToDevice(source, buffer_size): Next(), compute
//
// Printed: the serial upload time T of one batch and the pipeline's own
// transfer rate (no compute), then per factor the medians over --rounds of:
// total times, speedup = serial / prefetch, and the consumer stall fraction
// = time inside Next() / (steps x step time), with and without the first
// batch (which no pipeline can hide), plus the daemon's own stall figure.
// Target: stall under 5% of step time when the producer keeps up.
//
//   build/bin/prefetch_bench [--batch_mib=8] [--steps=40] [--buffer_size=2] [--rounds=3]
//                            [--step_factors=0.5,1,1.5,2] [--compute=sleep|spin]
//                            [--backend=cpu|cuda] [--devices=8]
//                            [--path=stream|region|auto] [--calibrate=serial|pipeline]
//                            [--views]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "common/lock_order_checks.h"
#include "placement/client/client.h"
#include "placement/client/prefetch.h"
#include "placement/client/tensors.h"
#include "placement/client/views.h"
#include "server/daemon.h"

ABSL_FLAG(double, batch_mib, 8, "Host bytes per batch (images f32 + labels i32), MiB.");
ABSL_FLAG(int, steps, 40, "Training steps (batches) per measured loop.");
ABSL_FLAG(int, buffer_size, 2, "Prefetch buffer_size.");
ABSL_FLAG(std::string, step_factors, "0.5,1,1.5,2",
          "Step time as multiples of the measured serial upload time of one batch.");
ABSL_FLAG(std::string, compute, "sleep", "How a step computes: sleep or spin.");
ABSL_FLAG(int, devices, 8, "Devices of the in-process daemon (CPU virtual, or logical of GPU 0).");
ABSL_FLAG(std::string, backend, "cpu", "cpu or cuda (batches land on GPU 0).");
ABSL_FLAG(std::string, path, "stream",
          "How prefetch batches travel: stream (gRPC chunks), region (the same-host region "
          "ring), auto (a region when the daemon is local and the batch large).");
ABSL_FLAG(std::string, calibrate, "serial",
          "What a step factor multiplies: serial (one UploadBatch over the stream) or pipeline "
          "(the prefetch pipeline's own per-batch time without compute, so factor 1 is compute "
          "= transfer on the path measured).");
ABSL_FLAG(bool, views, false,
          "Batches come with zero-copy views (PrefetchOptions::views): a step first reads every "
          "byte of its batch through them, then computes for the rest of the step time (the "
          "serial loop views and reads its uploaded batch the same way).");
ABSL_FLAG(int, rounds, 3, "Alternating serial/prefetch rounds per factor; medians are printed.");

namespace placement::bench {
namespace {

using client::HostBatch;

constexpr int64_t kRowFloats = 1024;  // images f32[rows, 1024]

// A pool of distinct host batches; the source copies one per step, as a
// loader hands over fresh buffers (both loops pay the same copy).
struct Pool {
  std::vector<HostBatch> batches;
  int64_t bytes_per_batch = 0;

  explicit Pool(double mib) {
    const int64_t rows =
        std::max<int64_t>(1, static_cast<int64_t>(mib * (1 << 20)) / (kRowFloats * 4 + 4));
    for (int k = 0; k < 4; ++k) {
      std::vector<float> images(rows * kRowFloats, static_cast<float>(k));
      std::vector<int32_t> labels(rows, k);
      HostBatch batch;
      batch.Add<float>("images", images, {rows, kRowFloats});
      batch.Add<int32_t>("labels", labels, {rows});
      batches.push_back(std::move(batch));
    }
    for (const auto& a : batches[0].arrays) bytes_per_batch += a.bytes.size();
  }
  HostBatch Make(int step) const { return batches[step % batches.size()]; }
};

void Compute(absl::Duration d, bool spin) {
  if (!spin) {
    absl::SleepFor(d);
    return;
  }
  const absl::Time end = absl::Now() + d;
  volatile uint64_t x = 0;
  while (absl::Now() < end) x = x + 1;
}

// One pass over every viewed byte (a sum of 64-bit words, as a step's
// first read of its inputs), so the read cannot be optimized away.
uint64_t ReadViews(const std::vector<std::shared_ptr<const client::TensorView>>& views) {
  uint64_t sum = 0;
  for (const auto& view : views) {
    for (size_t i = 0; i < view->shards().size(); ++i) {
      const std::span<const std::byte> bytes = view->bytes(i);
      const size_t words = bytes.size() / sizeof(uint64_t);
      for (size_t w = 0; w < words; ++w) {
        uint64_t v;
        std::memcpy(&v, bytes.data() + w * sizeof(uint64_t), sizeof(v));
        sum += v;
      }
    }
  }
  return sum;
}

// A step on a batch: with views, the read of its bytes counts into the step
// time and the compute takes the rest.
void Step(const std::vector<std::shared_ptr<const client::TensorView>>& views, absl::Duration d,
          bool spin) {
  const absl::Time start = absl::Now();
  static volatile uint64_t sink = 0;
  if (!views.empty()) sink = sink + ReadViews(views);
  Compute(std::max(absl::ZeroDuration(), d - (absl::Now() - start)), spin);
}

// One serial step's upload (UploadBatch) and delete; returns the upload time.
absl::StatusOr<absl::Duration> UploadAndDelete(const client::TensorClient& tensors,
                                               const HostBatch& batch) {
  absl::Time start = absl::Now();
  auto uploaded = tensors.UploadBatch(batch.Views());
  if (!uploaded.ok()) return uploaded.status();
  absl::Duration upload = absl::Now() - start;
  std::vector<std::string> ids;
  for (const auto& t : *uploaded) ids.push_back(t.tensor.id);
  if (auto deleted = tensors.Delete(ids); !deleted.ok()) return deleted.status();
  return upload;
}

absl::StatusOr<absl::Duration> Serial(const client::Client& client,
                                      const client::TensorClient& tensors, const Pool& pool,
                                      int steps, absl::Duration step, bool spin) {
  absl::Time start = absl::Now();
  for (int s = 0; s < steps; ++s) {
    HostBatch batch = pool.Make(s);
    auto uploaded = tensors.UploadBatch(batch.Views());
    if (!uploaded.ok()) return uploaded.status();
    std::vector<std::shared_ptr<const client::TensorView>> views;
    if (absl::GetFlag(FLAGS_views)) {
      for (const auto& t : *uploaded) {
        auto view = client::TensorView::Open(client, t.tensor.id);
        if (!view.ok()) return view.status();
        views.push_back(*std::move(view));
      }
    }
    Step(views, step, spin);
    views.clear();  // closes them
    std::vector<std::string> ids;
    for (const auto& t : *uploaded) ids.push_back(t.tensor.id);
    if (auto deleted = tensors.Delete(ids); !deleted.ok()) return deleted.status();
  }
  return absl::Now() - start;
}

struct PrefetchResult {
  absl::Duration total;
  absl::Duration stall;         // inside the Next() calls that returned a batch
  absl::Duration first_stall;   // inside the first Next()
  absl::Duration daemon_stall;  // the daemon's consumer_stall figure
};

absl::StatusOr<PrefetchResult> Prefetch(const client::Client& client, const Pool& pool, int steps,
                                        absl::Duration step, bool spin, int buffer_size) {
  auto next = std::make_shared<int>(0);
  client::BatchSource source = [&pool, next, steps]() -> absl::StatusOr<std::optional<HostBatch>> {
    if (*next >= steps) return std::optional<HostBatch>();
    return std::optional<HostBatch>(pool.Make((*next)++));
  };
  PrefetchResult result;
  absl::Time start = absl::Now();
  client::PrefetchOptions options;
  const std::string path = absl::GetFlag(FLAGS_path);
  options.path = path == "region" ? client::TransferPath::kRegion
                 : path == "auto" ? client::TransferPath::kAuto
                                  : client::TransferPath::kStream;
  options.views = absl::GetFlag(FLAGS_views);
  auto it = client::PrefetchToDevice(client, source, client::Rule(), buffer_size, options);
  if (!it.ok()) return it.status();
  for (int s = 0;; ++s) {
    absl::Time asked = absl::Now();
    auto batch = (*it)->Next();
    if (!batch.ok()) return batch.status();
    if (!batch->has_value()) break;  // end of data: not a stall
    absl::Duration waited = absl::Now() - asked;
    result.stall += waited;
    if (s == 0) result.first_stall = waited;
    Step((*batch)->views, step, spin);
  }
  result.total = absl::Now() - start;
  const auto& stats = (*it)->stats();
  if (stats.daemon.has_value()) {
    result.daemon_stall = stats.daemon->consumer_stall;
  }
  return result;
}

std::string Ms(absl::Duration d) {
  return absl::StrFormat("%.1f ms", absl::ToDoubleMilliseconds(d));
}

int Run() {
  server::DaemonConfig config;
  config.listen = "127.0.0.1:0";
  config.backend.kind = absl::GetFlag(FLAGS_backend);
  server::RequestDevicesEverywhere({absl::GetFlag(FLAGS_devices), 0}, &config.backend.platforms);
  auto daemon = server::Daemon::Start(config);
  if (!daemon.ok()) {
    std::fprintf(stderr, "daemon: %s\n", daemon.status().ToString().c_str());
    return 1;
  }
  auto client = client::Client::Connect((*daemon)->address());
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    return 1;
  }
  client::TensorClient tensors(**client);
  const Pool pool(absl::GetFlag(FLAGS_batch_mib));
  const int steps = absl::GetFlag(FLAGS_steps);
  const int buffer_size = absl::GetFlag(FLAGS_buffer_size);
  const bool spin = absl::GetFlag(FLAGS_compute) == "spin";

  // Calibrate: median serial upload time of one batch (after warm-up).
  std::vector<absl::Duration> uploads;
  for (int i = 0; i < 12; ++i) {
    auto t = UploadAndDelete(tensors, pool.Make(i));
    if (!t.ok()) {
      std::fprintf(stderr, "upload: %s\n", t.status().ToString().c_str());
      return 1;
    }
    if (i >= 2) uploads.push_back(*t);
  }
  std::sort(uploads.begin(), uploads.end());
  const absl::Duration transfer = uploads[uploads.size() / 2];
  std::printf(
      "prefetch_bench: batch %.2f MiB (images f32 + labels i32), %d steps, buffer_size %d,"
      " compute=%s, %d %s devices\n",
      pool.bytes_per_batch / double(1 << 20), steps, buffer_size, spin ? "spin" : "sleep",
      absl::GetFlag(FLAGS_devices), absl::GetFlag(FLAGS_backend).c_str());
  std::printf("serial upload of one batch (UploadBatch, median of 10): %s = %.0f MiB/s\n",
              Ms(transfer).c_str(),
              pool.bytes_per_batch / double(1 << 20) / absl::ToDoubleSeconds(transfer));
  // The pipeline with no compute at all: its own transfer rate (after one
  // untimed run that warms the backend's block cache like the calibration
  // warmed it for UploadBatch).
  auto bare = Prefetch(**client, pool, steps, absl::ZeroDuration(), spin, buffer_size);
  if (bare.ok()) bare = Prefetch(**client, pool, steps, absl::ZeroDuration(), spin, buffer_size);
  if (!bare.ok()) {
    std::fprintf(stderr, "prefetch: %s\n", bare.status().ToString().c_str());
    return 1;
  }
  auto serial_bare = Serial(**client, tensors, pool, steps, absl::ZeroDuration(), spin);
  if (!serial_bare.ok()) {
    std::fprintf(stderr, "serial: %s\n", serial_bare.status().ToString().c_str());
    return 1;
  }
  const absl::Duration streamed = bare->total / steps;
  const absl::Duration serial_step = *serial_bare / steps;
  std::printf(
      "no compute, per batch (source copy included): serial loop %s, prefetch %s = %.0f MiB/s"
      " (%.2fx the serial loop's throughput)\n",
      Ms(serial_step).c_str(), Ms(streamed).c_str(),
      pool.bytes_per_batch / double(1 << 20) / absl::ToDoubleSeconds(streamed),
      absl::ToDoubleSeconds(serial_step) / absl::ToDoubleSeconds(streamed));
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  std::printf("prefetch path: %s%s; step = factor x %s\n", absl::GetFlag(FLAGS_path).c_str(),
              absl::GetFlag(FLAGS_views) ? ", view batches (a step reads its batch first)" : "",
              absl::GetFlag(FLAGS_calibrate) == "pipeline" ? "the pipeline's per-batch time"
                                                           : "one serial UploadBatch");
  std::printf("medians of %d rounds (serial and prefetch alternate):\n", rounds);
  std::printf("%-7s %-9s %-11s %-11s %-8s %-11s %-13s %-12s\n", "factor", "step", "serial",
              "prefetch", "speedup", "stall/step", "stall(excl1)", "daemon stall");
  for (absl::string_view f : absl::StrSplit(absl::GetFlag(FLAGS_step_factors), ',')) {
    double factor = 0;
    if (!absl::SimpleAtod(f, &factor) || factor <= 0) continue;
    const absl::Duration step =
        (absl::GetFlag(FLAGS_calibrate) == "pipeline" ? streamed : transfer) * factor;
    const double compute_total = absl::ToDoubleSeconds(step * steps);
    std::vector<double> serial_ms, prefetch_ms, speedups, stalls, stalls_excl, daemon_ms;
    for (int r = 0; r < rounds; ++r) {
      auto serial = Serial(**client, tensors, pool, steps, step, spin);
      auto prefetch = Prefetch(**client, pool, steps, step, spin, buffer_size);
      if (!serial.ok() || !prefetch.ok()) {
        std::fprintf(stderr, "run failed: %s / %s\n", serial.status().ToString().c_str(),
                     prefetch.status().ToString().c_str());
        return 1;
      }
      serial_ms.push_back(absl::ToDoubleMilliseconds(*serial));
      prefetch_ms.push_back(absl::ToDoubleMilliseconds(prefetch->total));
      speedups.push_back(absl::ToDoubleSeconds(*serial) / absl::ToDoubleSeconds(prefetch->total));
      stalls.push_back(100 * absl::ToDoubleSeconds(prefetch->stall) / compute_total);
      stalls_excl.push_back(100 * absl::ToDoubleSeconds(prefetch->stall - prefetch->first_stall) /
                            compute_total);
      daemon_ms.push_back(absl::ToDoubleMilliseconds(prefetch->daemon_stall));
    }
    std::printf("%-7.2f %-9s %-11s %-11s %-8.2f %-11s %-13s %-12s\n", factor, Ms(step).c_str(),
                absl::StrFormat("%.1f ms", Median(serial_ms)).c_str(),
                absl::StrFormat("%.1f ms", Median(prefetch_ms)).c_str(), Median(speedups),
                absl::StrFormat("%.1f%%", Median(stalls)).c_str(),
                absl::StrFormat("%.1f%%", Median(stalls_excl)).c_str(),
                absl::StrFormat("%.1f ms", Median(daemon_ms)).c_str());
  }
  (*daemon)->Drain();
  return 0;
}

}  // namespace
}  // namespace placement::bench

int main(int argc, char** argv) {
  placement::SkipLockOrderChecksInRelease();
  absl::ParseCommandLine(argc, argv);
  return placement::bench::Run();
}
