// The "cpu" platform: CPU virtual devices in host memory (CpuBackend) and
// the LocalEngine over them. Always usable, so it is --backend=auto's last
// resort (lowest priority).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/collective/local/local_engine.h"
#include "server/platform/cpu/cpu_backend.h"
#include "server/platform/cpu/cpu_options.h"
#include "server/platform/platform.h"
#include "server/platform/platform_registry.h"

namespace placement::server {
namespace {

class CpuPlatform final : public Platform {
 public:
  absl::string_view name() const override { return "cpu"; }
  absl::string_view device_noun() const override { return "CPU"; }
  int auto_priority() const override { return 0; }
  std::string BuildNote() const override { return "cpu"; }
  // Host memory: Gloo moves it in place.
  std::string cross_process_transport() const override { return "gloo"; }

  void ReadFlags(PlatformOptions* options) const override {
    options->Mutable<CpuPlatformOptions>() = CpuOptionsFromFlags();
  }

  void RequestDevices(const DeviceRequest& request, PlatformOptions* options) const override {
    CpuPlatformOptions& cpu = options->Mutable<CpuPlatformOptions>();
    cpu.num_devices = request.count;
    cpu.device_memory_bytes = request.memory_bytes;
    if (request.cache_bytes >= 0) cpu.cache_bytes_per_device = request.cache_bytes;
  }

  std::vector<std::string> RequestFlags(const DeviceRequest& request) const override {
    return {absl::StrCat("--cpu_devices=", request.count),
            absl::StrCat("--cpu_device_memory=", request.memory_bytes)};
  }

  absl::StatusOr<std::unique_ptr<DeviceBackend>> CreateBackend(
      const PlatformConfig& config) const override {
    const CpuPlatformOptions& cpu = config.options.Get<CpuPlatformOptions>();
    CpuBackendOptions options;
    options.num_devices = cpu.num_devices;
    options.device_memory_bytes = cpu.device_memory_bytes;
    options.cache_bytes_per_device = cpu.cache_bytes_per_device;
    options.process_index = config.process_index;
    absl::StatusOr<std::unique_ptr<CpuBackend>> backend = CpuBackend::Create(options);
    if (!backend.ok()) return backend.status();
    return std::unique_ptr<DeviceBackend>(std::move(*backend));
  }

  absl::StatusOr<std::unique_ptr<CollectiveEngine>> CreateEngine(
      DeviceBackend* backend, const PlatformConfig& config) const override {
    if (!backend->HostAddressable()) {
      return absl::FailedPreconditionError("the cpu backend's buffers are not host-addressable");
    }
    LocalEngineOptions options;
    options.num_threads = config.local_collectives.num_threads;
    return std::unique_ptr<CollectiveEngine>(new LocalEngine(options));
  }

  std::string DescribeDevices(const DeviceBackend& backend, const PlatformConfig&) const override {
    return absl::StrCat(backend.Devices().size(), " CPU virtual devices");
  }
};

}  // namespace

PLACEMENT_REGISTER_PLATFORM(cpu, std::make_unique<CpuPlatform>());

}  // namespace placement::server
