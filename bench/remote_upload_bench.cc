// The C++ client's upload against a daemon that is already running: the
// baseline python/bench/upload_bench.py measures the Python client against,
// on the same daemon, rep by rep. Uploads one host buffer of --size_mib MiB
// (f32, touched once before timing) to device --device with
// TensorClient::Upload, deletes it, and prints one line per rep:
//
//   upload_seconds 0.1234 mb_per_s 2175.3 cpu_seconds 0.0567
//
// cpu_seconds is this process's user + system time during the upload (all
// threads): the client's own cost, which machine load does not inflate.
//
//   build/bin/remote_upload_bench --target=127.0.0.1:50051 [--size_mib=256]
//       [--reps=1] [--chunk_bytes=1048576] [--device=0]
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "common/lock_order_checks.h"
#include "placement/client/placement.h"

ABSL_FLAG(std::string, target, "", "Daemon address (host:port or unix:/path).");
ABSL_FLAG(int64_t, size_mib, 256, "Tensor size in MiB (f32).");
ABSL_FLAG(int, reps, 1, "Uploads to time.");
ABSL_FLAG(int64_t, chunk_bytes, int64_t{1} << 20, "Upload chunk size.");
ABSL_FLAG(int64_t, device, 0, "Target device id.");

namespace {

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  placement::SkipLockOrderChecksInRelease();
  absl::ParseCommandLine(argc, argv);
  namespace client = placement::client;
  const int64_t bytes = absl::GetFlag(FLAGS_size_mib) << 20;
  client::ClientOptions options;
  options.default_deadline = absl::Minutes(10);
  auto connected = client::Client::Connect(absl::GetFlag(FLAGS_target), options);
  if (!connected.ok()) {
    std::fprintf(stderr, "connect: %s\n", connected.status().ToString().c_str());
    return 1;
  }
  client::TensorClient tensors(**connected);
  std::vector<uint8_t> src(bytes);
  for (int64_t i = 0; i < bytes; i += 4096) src[i] = static_cast<uint8_t>(i >> 12);
  client::HostArray array{client::DType::kF32, {bytes / 4}, src};
  client::UploadOptions upload;
  upload.chunk_bytes = absl::GetFlag(FLAGS_chunk_bytes);
  const client::Rule rule = client::Placement::Device(absl::GetFlag(FLAGS_device));
  for (int rep = 0; rep < absl::GetFlag(FLAGS_reps); ++rep) {
    const double cpu_start = CpuSeconds();
    absl::Time start = absl::Now();
    auto info = tensors.Upload(array, rule, upload);
    absl::Duration took = absl::Now() - start;
    const double cpu = CpuSeconds() - cpu_start;
    if (!info.ok()) {
      std::fprintf(stderr, "upload: %s\n", info.status().ToString().c_str());
      return 1;
    }
    std::printf("upload_seconds %.6f mb_per_s %.1f cpu_seconds %.6f\n", absl::ToDoubleSeconds(took),
                bytes / absl::ToDoubleSeconds(took) / 1e6, cpu);
    if (auto deleted = tensors.Delete({info->id}); !deleted.ok()) {
      std::fprintf(stderr, "delete: %s\n", deleted.status().ToString().c_str());
      return 1;
    }
  }
  return 0;
}
