#include "server/collective/transport/cross_process_transport.h"

#include "absl/strings/str_cat.h"

namespace placement::server {

std::string TransportGroupKey::Name() const {
  return absl::StrCat(GenerationStem(), ProcessListKey(processes));
}

std::string TransportGroupKey::GenerationStem() const {
  return absl::StrCat("e", epoch, "/s", set_key, "/g", generation, "/p");
}

}  // namespace placement::server
