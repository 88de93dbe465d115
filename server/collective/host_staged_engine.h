// HostStagedEngine: collectives over device buffers that a platform's own
// engine cannot serve -- e.g. groups whose ranks share one physical device
// (logical devices), which a library allowing one rank per device per
// communicator (NCCL, RCCL) refuses. A building block platforms share. Every rank's send buffer is
// read into host memory through the DeviceBackend, the LocalEngine runs the collective there (same
// dtypes, ops and accumulation as on CPU virtual devices), and every receive buffer is written
// back.
//
// Cost: one device->host and one host->device copy per rank, plus host
// memory for the staged buffers while the call runs (not counted against
// device budgets). Correct for every kind; meant for development meshes on
// one GPU, not for speed.
//
// Thread-safe (the backend and LocalEngine are). Cancellation and deadlines
// are honoured between the copies and inside the LocalEngine; on error the
// receive buffers hold unspecified bytes, as for every engine.
#ifndef PLACEMENT_SERVER_COLLECTIVE_HOST_STAGED_ENGINE_H_
#define PLACEMENT_SERVER_COLLECTIVE_HOST_STAGED_ENGINE_H_

#include "server/collective/collective_engine.h"
#include "server/collective/local/local_engine.h"

namespace placement::server {

class HostStagedEngine final : public CollectiveEngine {
 public:
  // REQUIRES: backend outlives the engine.
  explicit HostStagedEngine(DeviceBackend* backend, const LocalEngineOptions& options = {});
  ~HostStagedEngine() override;

  absl::string_view Name() const override { return "host_staged"; }
  absl::Status Run(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                   const CollectiveContext& context) override;

 private:
  class HostMemory;

  DeviceBackend* backend_;
  std::unique_ptr<HostMemory> host_;
  LocalEngine local_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_HOST_STAGED_ENGINE_H_
