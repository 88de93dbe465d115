#include "server/collective/transport/cross_process_transport.h"

#include "absl/strings/str_cat.h"

namespace placement::server {

absl::Status CheckTransportOptions(absl::string_view name,
                                   const CrossProcessTransportOptions& options) {
  if (options.store == nullptr || options.backend == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " transport: store and backend are required"));
  }
  if (options.process_index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " transport: process index ", options.process_index, " is negative"));
  }
  return absl::OkStatus();
}

std::string GenerationAbandonedKey(uint64_t epoch, const std::string& set_key,
                                   uint64_t generation) {
  return absl::StrCat("abandoned/e", epoch, "/s", set_key, "/g", generation, "/why");
}

std::string TransportGroupKey::Name() const {
  return absl::StrCat(GenerationStem(), ProcessListKey(processes));
}

std::string TransportGroupKey::GenerationStem() const {
  return absl::StrCat("e", epoch, "/s", set_key, "/g", generation, "/p");
}

}  // namespace placement::server
