// Picks the platform for --backend=auto|NAME through the PlatformRegistry
// and creates its DeviceBackend; the collective engine for a backend comes
// from the same platform (CreateCollectiveEngine).
//
//   NAME  the registered platform of that name: FAILED_PRECONDITION when it
//         is not usable here ("--backend=cuda but no GPU is usable: ...");
//   auto  every registered platform by decreasing auto_priority; the first
//         usable one wins. A platform that refuses its settings
//         (INVALID_ARGUMENT) stops the search: bad flags are not a reason to
//         fall back. The note says what was skipped and why ("no usable GPU
//         (CUDA unavailable: ...); falling back to 8 CPU virtual devices").
// INVALID_ARGUMENT for a kind that is neither auto nor a registered name.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_PLATFORM_PLATFORM_SELECTION_H_
#define PLACEMENT_SERVER_PLATFORM_PLATFORM_SELECTION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/collective/collective_engine.h"
#include "server/device/device_backend.h"
#include "server/platform/platform.h"
#include "server/platform/platform_config.h"

namespace placement::server {

// The --backend flag and every platform's settings (flags), without the
// node identity, which the daemon owns and adds (MakePlatformConfig).
struct BackendOptions {
  std::string kind = "auto";  // "auto" or a registered platform name
  PlatformOptions platforms;  // each platform's own options, by type
  LocalCollectiveOptions local_collectives;
};

// --backend and every registered platform's flags (Platform::ReadFlags);
// defined with the --backend flag in platform_flags.cc.
BackendOptions BackendOptionsFromFlags();

// Platform::RequestDevices of every registered platform: `options` then
// asks whichever platform is picked for the same devices.
void RequestDevicesEverywhere(const DeviceRequest& request, PlatformOptions* options);

PlatformConfig MakePlatformConfig(const BackendOptions& options, int32_t process_index);

struct BackendSelection {
  const Platform* platform = nullptr;
  std::unique_ptr<DeviceBackend> backend;
  // Why this backend was chosen, for the log and GetStatus.
  std::string note;
};

absl::StatusOr<BackendSelection> SelectPlatform(absl::string_view kind,
                                                const PlatformConfig& config);

// SelectPlatform(options.kind, MakePlatformConfig(options, process_index)).
absl::StatusOr<BackendSelection> CreateBackend(const BackendOptions& options,
                                               int32_t process_index = 0);

// The engine of the platform that made `backend` (found by its name).
// REQUIRES: backend outlives the engine. FAILED_PRECONDITION when no
// registered platform made it; the platform's own errors.
absl::StatusOr<std::unique_ptr<CollectiveEngine>> CreateCollectiveEngine(
    DeviceBackend* backend, const PlatformConfig& config = {});

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PLATFORM_PLATFORM_SELECTION_H_
