#include "server/collective/transport/transport_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace placement::server {

TransportRegistry& TransportRegistry::Global() {
  static TransportRegistry* registry = new TransportRegistry();
  return *registry;
}

bool TransportRegistry::Register(std::string name, std::string note, TransportFactory factory) {
  absl::MutexLock lock(&mu_);
  return transports_.emplace(std::move(name), Entry{std::move(note), std::move(factory)}).second;
}

absl::StatusOr<std::unique_ptr<CrossProcessTransport>> TransportRegistry::Create(
    absl::string_view name, const CrossProcessTransportOptions& options) const {
  TransportFactory factory;
  {
    absl::MutexLock lock(&mu_);
    auto it = transports_.find(std::string(name));
    if (it != transports_.end()) factory = it->second.factory;
  }
  if (!factory) {
    const std::vector<std::string> names = Names();
    return absl::FailedPreconditionError(
        absl::StrCat("no cross-process transport '", name, "' in this build (registered: ",
                     names.empty() ? std::string("none") : absl::StrJoin(names, ", "), ")"));
  }
  return factory(options);
}

std::vector<std::string> TransportRegistry::Names() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const auto& [name, entry] : transports_) names.push_back(name);
  return names;
}

std::vector<std::string> TransportRegistry::Notes() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> notes;
  for (const auto& [name, entry] : transports_) notes.push_back(entry.note);
  return notes;
}

}  // namespace placement::server
