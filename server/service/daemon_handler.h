// gRPC front for placement.v1.DaemonService (GetStatus, ListStreams).
#ifndef PLACEMENT_SERVER_SERVICE_DAEMON_HANDLER_H_
#define PLACEMENT_SERVER_SERVICE_DAEMON_HANDLER_H_

#include <functional>

#include "placement/v1/daemon_service.grpc.pb.h"
#include "server/cluster/cluster.h"
#include "server/daemon_identity.h"
#include "server/device/device_inventory.h"
#include "server/device/memory_reclaimer.h"
#include "server/service/call_gate.h"
#include "server/service/stream_registry.h"

namespace placement::server {

// Live counts the status reports, each for one tenant (`tenant` set) or the
// whole daemon (null): a non-admin caller of an authenticating daemon is
// shown its own tenant's figures only. Each may be empty (reported as 0).
struct DaemonCounts {
  using Figure = std::function<int64_t(const std::string* tenant)>;
  Figure meshes;
  Figure tensors;
  Figure prefetch_streams;
  Figure sessions;
  Figure session_tensors;
  Figure open_streams;
  Figure regions;
  Figure device_bytes_in_use;  // per tenant only; the daemon's is the inventory's
  // ListStreams: the open streams (StreamRegistry::List); empty = none.
  std::function<std::vector<StreamSnapshot>()> streams;
};

// Frees memory now (MemoryReclaimer::TrimNow): every cached block when
// `tenant` is empty, else that tenant's (NOT_FOUND when it never held
// memory here). An empty function makes TrimMemory UNIMPLEMENTED.
using TrimMemoryFn = std::function<absl::StatusOr<TrimResult>(const std::string& tenant)>;

class DaemonHandler final : public placement::v1::DaemonService::CallbackService {
 public:
  // `cluster` may be null (unit tests): the status then reports a lone
  // daemon.
  DaemonHandler(const DaemonIdentity* identity, const DeviceInventory* inventory,
                DaemonCounts counts, CallGate* gate, const Cluster* cluster = nullptr,
                TrimMemoryFn trim = nullptr);
  ~DaemonHandler() override;

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const placement::v1::GetStatusRequest* request,
                                      placement::v1::GetStatusResponse* response) override;
  grpc::ServerUnaryReactor* ListStreams(grpc::CallbackServerContext* context,
                                        const placement::v1::ListStreamsRequest* request,
                                        placement::v1::ListStreamsResponse* response) override;
  grpc::ServerUnaryReactor* TrimMemory(grpc::CallbackServerContext* context,
                                       const placement::v1::TrimMemoryRequest* request,
                                       placement::v1::TrimMemoryResponse* response) override;

 private:
  const DaemonIdentity* identity_;
  const DeviceInventory* inventory_;
  DaemonCounts counts_;
  CallGate* gate_;
  const Cluster* cluster_;
  TrimMemoryFn trim_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_DAEMON_HANDLER_H_
