#include "server/platform/platform_registry.h"

#include <algorithm>

namespace placement::server {

PlatformRegistry& PlatformRegistry::Global() {
  static PlatformRegistry* registry = new PlatformRegistry();
  return *registry;
}

bool PlatformRegistry::Register(std::unique_ptr<Platform> platform) {
  absl::MutexLock lock(&mu_);
  for (const auto& p : platforms_) {
    if (p->name() == platform->name()) return false;
  }
  platforms_.push_back(std::move(platform));
  return true;
}

const Platform* PlatformRegistry::Find(absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  for (const auto& p : platforms_) {
    if (p->name() == name) return p.get();
  }
  return nullptr;
}

std::vector<const Platform*> PlatformRegistry::ByPriority() const {
  std::vector<const Platform*> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& p : platforms_) out.push_back(p.get());
  }
  std::sort(out.begin(), out.end(), [](const Platform* a, const Platform* b) {
    if (a->auto_priority() != b->auto_priority()) return a->auto_priority() > b->auto_priority();
    return a->name() < b->name();
  });
  return out;
}

std::vector<std::string> PlatformRegistry::Names() const {
  std::vector<std::string> names;
  for (const Platform* p : ByPriority()) names.emplace_back(p->name());
  return names;
}

}  // namespace placement::server
