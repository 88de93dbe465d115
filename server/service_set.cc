#include "server/service_set.h"

namespace placement::server {

struct ServiceSet::Impl {
  DeviceInventory* inventory = nullptr;
  CallGate* gate = nullptr;
  Metrics* metrics = nullptr;
  ServiceSetOptions options;
};

ServiceSet::ServiceSet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ServiceSet::~ServiceSet() = default;

absl::StatusOr<std::unique_ptr<ServiceSet>> ServiceSet::Create(DeviceInventory* inventory,
                                                               CallGate* gate, Metrics* metrics,
                                                               const ServiceSetOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->inventory = inventory;
  impl->gate = gate;
  impl->metrics = metrics;
  impl->options = options;
  return std::unique_ptr<ServiceSet>(new ServiceSet(std::move(impl)));
}

void ServiceSet::Register(grpc::ServerBuilder* /*builder*/) {}

DaemonCounts ServiceSet::counts() const { return DaemonCounts{}; }

void ServiceSet::StartShutdown() {}

}  // namespace placement::server
