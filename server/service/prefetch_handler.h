// gRPC front for placement.v1.PrefetchService: one ServerBidiReactor per
// stream on gRPC's callback API (no thread is pinned per stream). The
// reactor translates messages into PrefetchPipeline calls and the
// pipeline's outputs into ready / stats messages; admission, staging,
// release and freeing are the pipeline's (server/prefetch/).
//
// Transport rules kept here: a read is always outstanding while the client
// may send (releases must get through; the pipeline bounds memory by
// refusing batches beyond buffer_size), one write at a time, and the
// pipeline is closed -- every staged batch freed -- BEFORE the final status
// is sent, whatever the ending: OK after the stats, the pipeline's error,
// client cancel/disconnect (CANCELLED), or daemon shutdown (UNAVAILABLE).
// Each stream holds a CallGate ticket until gRPC is done with it.
//
// Thread-safe (the components are; each reactor serializes its callbacks).
#ifndef PLACEMENT_SERVER_SERVICE_PREFETCH_HANDLER_H_
#define PLACEMENT_SERVER_SERVICE_PREFETCH_HANDLER_H_

#include "placement/v1/prefetch_service.grpc.pb.h"
#include "server/prefetch/prefetch_manager.h"
#include "server/region/region_registry.h"
#include "server/service/call_gate.h"

namespace placement::server {

class PrefetchHandler final : public placement::v1::PrefetchService::CallbackService {
 public:
  // REQUIRES: manager, gate and regions (null: region chunks are refused)
  // outlive every stream.
  PrefetchHandler(PrefetchManager* manager, CallGate* gate, RegionRegistry* regions = nullptr);
  ~PrefetchHandler() override;

  grpc::ServerBidiReactor<placement::v1::PrefetchRequest, placement::v1::PrefetchResponse>*
  Prefetch(grpc::CallbackServerContext* context) override;

 private:
  PrefetchManager* manager_;
  CallGate* gate_;
  RegionRegistry* regions_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_PREFETCH_HANDLER_H_
