// ServiceSet: the data-plane components (mesh registry, tensor store,
// collective engine, prefetch pipelines) and their gRPC handlers, created
// together over one DeviceInventory so the daemon wires them in one place.
//
// Thread-safe after Create.
#ifndef PLACEMENT_SERVER_SERVICE_SET_H_
#define PLACEMENT_SERVER_SERVICE_SET_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/server_builder.h"
#include "server/collective/collective_engine.h"
#include "server/device/device_inventory.h"
#include "server/metrics/metrics.h"
#include "server/region/region_registry.h"
#include "server/service/call_gate.h"
#include "server/service/daemon_handler.h"
#include "server/session/session_manager.h"

namespace placement::server {

struct ServiceSetOptions {
  int64_t max_tensor_bytes_per_owner = 0;   // 0 = unlimited
  int64_t max_device_bytes_per_tenant = 0;  // page-rounded; 0 = unlimited
  int64_t max_tensors_per_tenant = 0;       // 0 = unlimited
  SessionOptions sessions;
  // Shared-memory regions: the fd-passing socket ("" = fd passing off) and
  // the registry's bounds.
  std::string region_socket;
  RegionRegistryOptions regions;
};

class ServiceSet {
 public:
  // `engine` is the platform's collective engine for the inventory's
  // backend (Platform::CreateEngine); the ServiceSet owns it.
  static absl::StatusOr<std::unique_ptr<ServiceSet>> Create(
      DeviceInventory* inventory, std::unique_ptr<CollectiveEngine> engine, CallGate* gate,
      Metrics* metrics, const ServiceSetOptions& options);
  ~ServiceSet();

  // Registers every handler. REQUIRES: called once, before BuildAndStart.
  void Register(grpc::ServerBuilder* builder);
  // Live counts for GetStatus.
  DaemonCounts counts() const;
  // The fd-passing socket clients use for regions ("" when off).
  std::string region_socket() const;
  // Wakes long-lived streams (prefetch) so the server can stop.
  void StartShutdown();

 private:
  struct Impl;
  explicit ServiceSet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_SET_H_
