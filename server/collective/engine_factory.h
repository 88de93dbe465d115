// Chooses the CollectiveEngine for the daemon's DeviceBackend: CPU virtual
// devices -> LocalEngine; CUDA -> NcclEngine (when the binary was built with
// CUDA). The Gloo engine spans processes and is created explicitly with its
// rendezvous (see gloo/gloo_engine.h), never by this factory.
#ifndef PLACEMENT_SERVER_COLLECTIVE_ENGINE_FACTORY_H_
#define PLACEMENT_SERVER_COLLECTIVE_ENGINE_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "server/collective/collective_engine.h"
#include "server/collective/local/local_engine.h"
#include "server/device/device_backend.h"

namespace placement::server {

struct CollectiveEngineOptions {
  LocalEngineOptions local;
};

// REQUIRES: backend outlives the engine. FAILED_PRECONDITION for a backend
// no engine serves (e.g. "cuda" in a build without CUDA, or a CPU backend
// whose buffers are not host-addressable); NCCL's own Create errors.
absl::StatusOr<std::unique_ptr<CollectiveEngine>> CreateCollectiveEngine(
    DeviceBackend* backend, const CollectiveEngineOptions& options = {});

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_ENGINE_FACTORY_H_
