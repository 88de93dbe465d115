// ServiceSet: the data-plane components (mesh registry, tensor store,
// collective engine, prefetch pipelines) and their gRPC handlers, created
// together over one DeviceInventory so the daemon wires them in one place.
//
// Thread-safe after Create.
#ifndef PLACEMENT_SERVER_SERVICE_SET_H_
#define PLACEMENT_SERVER_SERVICE_SET_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/server_builder.h"
#include "server/collective/collective_engine.h"
#include "server/device/device_inventory.h"
#include "server/metrics/metrics.h"
#include "server/region/region_registry.h"
#include "server/service/call_gate.h"
#include "server/service/daemon_handler.h"
#include "server/service/device_handler.h"
#include "server/session/session_manager.h"
#include "server/view/export_registry.h"

namespace placement::server {

class Cluster;
struct ClusterView;
class ClusterMeshes;
class ClusterTensors;
class MeshAuthority;
class PeerChannels;
class CrossProcessTransport;

struct ServiceSetOptions {
  // The tensor store's quotas.
  TensorStoreOptions tensors;
  SessionOptions sessions;
  // Shared-memory regions: the fd-passing socket ("" = fd passing off) and
  // the registry's bounds.
  std::string region_socket;
  FdPassingOptions region_socket_options;
  RegionRegistryOptions regions;
  // Shard views (exports) handed out over the region socket.
  ExportOptions exports;
  // The daemon's cluster membership (disabled for a lone daemon), the
  // channels to the other daemons and the gate of the daemon-to-daemon
  // services; null in unit tests.
  Cluster* cluster = nullptr;
  PeerChannels* peer_channels = nullptr;
  CallGate* peer_gate = nullptr;
  // The registered cross-process transport the platform moves its buffers
  // between daemons with (Platform::cross_process_transport), or the one an
  // operator chose (--cluster_transport).
  std::string cross_process_transport = "gloo";
  // Whether the daemon must not run without it: chosen by the operator. The
  // platform's default may be missing from a build (no Gloo); then
  // collectives that span daemons fail and the daemon still serves.
  bool cross_process_transport_required = false;
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
  // Registers the PeerService (daemon to daemon) when in a cluster; on the
  // public server when the peer address is the public one.
  void RegisterPeer(grpc::ServerBuilder* builder);
  // After the cluster formed (ids assigned): hooks the store, registry and
  // ops to the cluster and copies what a rejoining daemon lacks.
  absl::Status AttachCluster(const ClusterView& view);
  // What moves collectives' bytes between daemons once the cluster formed;
  // null outside a cluster or when the build has no such transport.
  const CrossProcessTransport* cross_process_transport() const;
  // The mesh registry the coordinator serves (process 0); null when not in
  // a cluster.
  MeshAuthority* mesh_authority() const;
  // Prepared-but-uncommitted tensors (cluster), for status and tests.
  int64_t pending_tensors() const;
  // Live counts for GetStatus.
  DaemonCounts counts() const;
  // One tenant's bytes per device, for ListDevices.
  DeviceHandler::TenantUseFn tenant_device_use() const;
  // The memory owner tag of a tenant's tensors, or nullopt when the tenant
  // never stored one here (a tenant's TrimMemory).
  std::function<std::optional<MemoryOwnerTag>(const std::string&)> memory_owner_of() const;
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
