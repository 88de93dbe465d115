// The "cuda" platform of a build without the CUDA toolkit: registered so
// that --backend=cuda and --backend=auto say why there is no GPU ("this
// build has no CUDA backend") instead of calling the name unknown.
#include <memory>
#include <string>

#include "server/platform/platform.h"
#include "server/platform/platform_registry.h"

namespace placement::server {
namespace {

constexpr char kNotBuilt[] = "this build has no CUDA backend (PLACEMENT_WITH_CUDA=OFF)";

class UnavailableCudaPlatform final : public Platform {
 public:
  absl::string_view name() const override { return "cuda"; }
  absl::string_view device_noun() const override { return "GPU"; }
  int auto_priority() const override { return 100; }
  std::string BuildNote() const override { return "CUDA off"; }
  bool compiled_in() const override { return false; }
  std::string cross_process_transport() const override { return "gloo"; }

  absl::StatusOr<std::unique_ptr<DeviceBackend>> CreateBackend(
      const PlatformConfig&) const override {
    return absl::FailedPreconditionError(kNotBuilt);
  }
  absl::StatusOr<std::unique_ptr<CollectiveEngine>> CreateEngine(
      DeviceBackend*, const PlatformConfig&) const override {
    return absl::FailedPreconditionError(kNotBuilt);
  }
  std::string DescribeDevices(const DeviceBackend&, const PlatformConfig&) const override {
    return "no devices";
  }
};

}  // namespace

PLACEMENT_REGISTER_PLATFORM(cuda, std::make_unique<UnavailableCudaPlatform>());

}  // namespace placement::server
