// Platform: one kind of hardware the daemon can serve ("cpu", "cuda"; later
// ROCm or others), modelled on XLA's PjRt client-factory registry. A
// platform makes, from one PlatformConfig, the DeviceBackend that owns its
// devices and the intra-node CollectiveEngine that serves groups of those
// devices. Platforms register themselves with PLACEMENT_REGISTER_PLATFORM
// (platform_registry.h) in their own folder (server/platform/<name>/); the
// daemon picks one by name (--backend=NAME) or asks every registered
// platform, highest auto_priority first (--backend=auto). Nothing outside a
// platform's folder and the registry knows platform names or types: a
// platform's options and flags live in its folder too (ReadFlags), and
// adding one is a folder plus one entry in server/CMakeLists.txt
// (docs/adding-a-backend.md).
//
// Implementations are stateless and thread-safe.
#ifndef PLACEMENT_SERVER_PLATFORM_PLATFORM_H_
#define PLACEMENT_SERVER_PLATFORM_PLATFORM_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/collective/collective_engine.h"
#include "server/device/device_backend.h"
#include "server/platform/platform_config.h"

namespace placement::server {

// What callers that must run on whichever platform is picked (the
// conformance suite, benchmarks) ask of it: `count` devices (per physical
// device, for platforms that split one into logical devices) of
// `memory_bytes` each, keeping at most `cache_bytes` of freed blocks per
// device (-1: the platform's default).
struct DeviceRequest {
  int count = 1;
  int64_t memory_bytes = 0;
  int64_t cache_bytes = -1;
};

class Platform {
 public:
  virtual ~Platform() = default;

  // The --backend value and DeviceBackend::Name() of its backends.
  virtual absl::string_view name() const = 0;
  // What the platform's devices are called in messages ("GPU", "CPU"):
  // "--backend=cuda but no GPU is usable: ...".
  virtual absl::string_view device_noun() const = 0;
  // --backend=auto asks platforms in decreasing priority; the always-usable
  // fallback (cpu) has the lowest.
  virtual int auto_priority() const = 0;

  // What --version says of this platform in this build ("cpu", "cuda (NCCL
  // collectives)"; for a platform compiled out, why: "CUDA off").
  virtual std::string BuildNote() const = 0;
  // False for a stand-in registered by a build without the platform.
  virtual bool compiled_in() const { return true; }

  // Copies the platform's own flags (declared in its folder) into
  // `options`. Called by the daemon for every registered platform.
  virtual void ReadFlags(PlatformOptions* options) const {}
  // Sets `options` so that CreateBackend makes the devices `request` asks
  // for (DeviceRequest).
  virtual void RequestDevices(const DeviceRequest& request, PlatformOptions* options) const {}
  // The same request as placementd flags ("--cpu_devices=4", ...), for
  // tests and benchmarks that start a daemon on this platform.
  virtual std::vector<std::string> RequestFlags(const DeviceRequest& request) const { return {}; }

  // The cross-process transport (server/collective/transport/) that moves
  // this platform's buffers between daemons, by registered name: "gloo"
  // stages any backend's buffers through host memory; a platform with its
  // own (NCCL, RCCL) names that.
  virtual std::string cross_process_transport() const = 0;

  // FAILED_PRECONDITION (with the driver's or the build's reason) when the
  // platform is not usable on this machine -- auto then asks the next one;
  // INVALID_ARGUMENT for settings in `config` it cannot honour (an operator
  // error: auto stops there instead of falling back).
  virtual absl::StatusOr<std::unique_ptr<DeviceBackend>> CreateBackend(
      const PlatformConfig& config) const = 0;

  // The engine for groups of `backend`'s devices. REQUIRES: backend was made
  // by this platform's CreateBackend and outlives the engine.
  virtual absl::StatusOr<std::unique_ptr<CollectiveEngine>> CreateEngine(
      DeviceBackend* backend, const PlatformConfig& config) const = 0;

  // The devices of a backend this platform made, for the log and GetStatus:
  // "8 CPU virtual devices", "2 CUDA device(s) (4 logical per GPU)".
  virtual std::string DescribeDevices(const DeviceBackend& backend,
                                      const PlatformConfig& config) const = 0;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PLATFORM_PLATFORM_H_
