#include "server/collective/engine_factory.h"

#include "absl/strings/str_cat.h"

#if PLACEMENT_WITH_CUDA
#include "server/collective/nccl/nccl_engine.h"
#include "server/device/cuda/cuda_backend.h"
#endif

namespace placement::server {

absl::StatusOr<std::unique_ptr<CollectiveEngine>> CreateCollectiveEngine(
    DeviceBackend* backend, const CollectiveEngineOptions& options) {
  if (backend->Name() == "cpu") {
    if (!backend->HostAddressable()) {
      return absl::FailedPreconditionError("the cpu backend's buffers are not host-addressable");
    }
    return std::unique_ptr<CollectiveEngine>(new LocalEngine(options.local));
  }
#if PLACEMENT_WITH_CUDA
  if (backend->Name() == "cuda") {
    auto* cuda = dynamic_cast<CudaBackend*>(backend);
    if (cuda == nullptr) {
      return absl::FailedPreconditionError("the 'cuda' backend is not a CudaBackend");
    }
    absl::StatusOr<std::unique_ptr<NcclEngine>> engine = NcclEngine::Create(cuda);
    if (!engine.ok()) return engine.status();
    return std::unique_ptr<CollectiveEngine>(std::move(*engine));
  }
#endif
  return absl::FailedPreconditionError(
      absl::StrCat("no collective engine for the '", backend->Name(), "' backend in this build"));
}

}  // namespace placement::server
