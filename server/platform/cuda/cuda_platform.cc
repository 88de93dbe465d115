// The "cuda" platform: the GPUs the CUDA runtime reports (CudaBackend,
// optionally split into logical devices) and the NcclEngine over them
// (host-staged for groups whose ranks share a GPU). Highest
// --backend=auto priority; built only when the CUDA toolkit is found
// (cuda_platform_unavailable.cc stands in otherwise).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/platform/cuda/cuda_backend.h"
#include "server/platform/cuda/cuda_options.h"
#include "server/platform/cuda/nccl_engine.h"
#include "server/platform/platform.h"
#include "server/platform/platform_registry.h"

namespace placement::server {
namespace {

class CudaPlatform final : public Platform {
 public:
  absl::string_view name() const override { return "cuda"; }
  absl::string_view device_noun() const override { return "GPU"; }
  int auto_priority() const override { return 100; }
  std::string BuildNote() const override { return "cuda (NCCL collectives)"; }
  // Host-staged Gloo: CUDA shards go through pinned host memory
  // (CudaBackend::Read / Write). NcclTransport ("nccl", nccl_transport.h)
  // is experimental until it has run on two GPUs: an operator chooses it
  // with --cluster_transport=nccl.
  std::string cross_process_transport() const override { return "gloo"; }

  void ReadFlags(PlatformOptions* options) const override {
    options->Mutable<CudaPlatformOptions>() = CudaOptionsFromFlags();
  }

  void RequestDevices(const DeviceRequest& request, PlatformOptions* options) const override {
    CudaPlatformOptions& cuda = options->Mutable<CudaPlatformOptions>();
    cuda.logical_devices = request.count;
    cuda.device_memory_bytes = request.memory_bytes;
    if (request.cache_bytes >= 0) cuda.cache_bytes_per_device = request.cache_bytes;
  }

  std::vector<std::string> RequestFlags(const DeviceRequest& request) const override {
    return {absl::StrCat("--cuda_logical_devices=", request.count),
            absl::StrCat("--cuda_device_memory=", request.memory_bytes)};
  }

  absl::StatusOr<std::unique_ptr<DeviceBackend>> CreateBackend(
      const PlatformConfig& config) const override {
    const CudaPlatformOptions& cuda = config.options.Get<CudaPlatformOptions>();
    CudaBackendOptions options;
    options.memory_fraction = cuda.memory_fraction;
    options.process_index = config.process_index;
    options.logical_devices_per_gpu = cuda.logical_devices;
    options.device_memory_bytes = cuda.device_memory_bytes;
    for (const std::string& gpu : cuda.gpus) {
      int ordinal = 0;
      if (!absl::SimpleAtoi(gpu, &ordinal)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--cuda_gpus: '", gpu, "' is not a CUDA ordinal (0, 1, ...)"));
      }
      options.gpus.push_back(ordinal);
    }
    if (cuda.cache_bytes_per_device >= 0) {
      options.cache_bytes_per_device = cuda.cache_bytes_per_device;
    }
    absl::StatusOr<std::unique_ptr<CudaBackend>> backend = CudaBackend::Create(options);
    if (!backend.ok()) return backend.status();
    return std::unique_ptr<DeviceBackend>(std::move(*backend));
  }

  absl::StatusOr<std::unique_ptr<CollectiveEngine>> CreateEngine(
      DeviceBackend* backend, const PlatformConfig&) const override {
    auto* cuda = dynamic_cast<CudaBackend*>(backend);
    if (cuda == nullptr) {
      return absl::FailedPreconditionError("the 'cuda' backend is not a CudaBackend");
    }
    absl::StatusOr<std::unique_ptr<NcclEngine>> engine = NcclEngine::Create(cuda);
    if (!engine.ok()) return engine.status();
    return std::unique_ptr<CollectiveEngine>(std::move(*engine));
  }

  std::string DescribeDevices(const DeviceBackend& backend,
                              const PlatformConfig& config) const override {
    std::string text = absl::StrCat(backend.Devices().size(), " CUDA device(s)");
    const int32_t logical = config.options.Get<CudaPlatformOptions>().logical_devices;
    if (logical > 1) {
      absl::StrAppend(&text, " (", logical, " logical per GPU)");
    }
    return text;
  }
};

}  // namespace

PLACEMENT_REGISTER_PLATFORM(cuda, std::make_unique<CudaPlatform>());

}  // namespace placement::server
