// TransportRegistry: name -> factory of a CrossProcessTransport, filled
// before main() by the PLACEMENT_REGISTER_TRANSPORT lines beside each
// transport (server/collective/transport/<name>/), whose sources the build
// links into every binary (placement_add_transport, server/CMakeLists.txt).
// The daemon creates the transport its platform names
// (Platform::CrossProcessTransport) or --cluster_transport; the transport
// conformance suite runs every registered one.
//
// Thread-safe: registration happens during static initialisation; lookups
// afterwards only read.
#ifndef PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_TRANSPORT_REGISTRY_H_
#define PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_TRANSPORT_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/collective/transport/cross_process_transport.h"

namespace placement::server {

// INVALID_ARGUMENT for options the transport cannot use; UNAVAILABLE when
// it cannot listen on options.hostname; FAILED_PRECONDITION when the
// hardware it needs is absent.
using TransportFactory = std::function<absl::StatusOr<std::unique_ptr<CrossProcessTransport>>(
    const CrossProcessTransportOptions& options)>;

class TransportRegistry {
 public:
  static TransportRegistry& Global();

  // Adds `factory` under `name`; false when the name is taken.
  bool Register(std::string name, std::string note, TransportFactory factory);
  // FAILED_PRECONDITION naming the registered transports when `name` is
  // not one of them; the factory's errors.
  absl::StatusOr<std::unique_ptr<CrossProcessTransport>> Create(
      absl::string_view name, const CrossProcessTransportOptions& options) const;
  // Registered names, sorted.
  std::vector<std::string> Names() const;
  // What --version says of each ("gloo collectives"), by name.
  std::vector<std::string> Notes() const;

 private:
  struct Entry {
    std::string note;
    TransportFactory factory;
  };
  mutable absl::Mutex mu_;
  std::map<std::string, Entry> transports_ ABSL_GUARDED_BY(mu_);
};

// Registers a transport during static initialisation:
//   PLACEMENT_REGISTER_TRANSPORT(gloo, "gloo collectives", &GlooTransport::Create);
#define PLACEMENT_REGISTER_TRANSPORT(id, note, factory)                    \
  [[maybe_unused]] static const bool placement_transport_registered_##id = \
      ::placement::server::TransportRegistry::Global().Register(#id, note, factory)

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_TRANSPORT_REGISTRY_H_
