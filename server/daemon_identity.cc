#include "server/daemon_identity.h"

#include <random>

#include "absl/strings/str_format.h"

#ifndef PLACEMENT_VERSION
#define PLACEMENT_VERSION "0.0.0-dev"
#endif

namespace placement::server {

std::string NewInstanceId() {
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return absl::StrFormat("%016x", v);
}

std::string PlacementVersion() { return PLACEMENT_VERSION; }

}  // namespace placement::server
