// PlatformRegistry: name -> Platform, filled before main() by the
// PLACEMENT_REGISTER_PLATFORM lines in each platform's folder (the build
// links those files into every binary that links placement_server).
//
// Thread-safe: registration happens during static initialisation; lookups
// afterwards only read.
#ifndef PLACEMENT_SERVER_PLATFORM_PLATFORM_REGISTRY_H_
#define PLACEMENT_SERVER_PLATFORM_PLATFORM_REGISTRY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/platform/platform.h"

namespace placement::server {

class PlatformRegistry {
 public:
  static PlatformRegistry& Global();

  // Adds `platform`; false (and the platform is dropped) when its name is
  // already taken.
  bool Register(std::unique_ptr<Platform> platform);
  // nullptr for names nobody registered.
  const Platform* Find(absl::string_view name) const;
  // Every platform, highest auto_priority first (ties by name).
  std::vector<const Platform*> ByPriority() const;
  // Their names in that order ("cuda, cpu").
  std::vector<std::string> Names() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Platform>> platforms_ ABSL_GUARDED_BY(mu_);
};

// Registers a platform during static initialisation:
//   PLACEMENT_REGISTER_PLATFORM(cpu, std::make_unique<CpuPlatform>());
#define PLACEMENT_REGISTER_PLATFORM(id, make)                             \
  [[maybe_unused]] static const bool placement_platform_registered_##id = \
      ::placement::server::PlatformRegistry::Global().Register(make)

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PLATFORM_PLATFORM_REGISTRY_H_
