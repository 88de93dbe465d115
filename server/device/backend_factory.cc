#include "server/device/backend_factory.h"

#include "absl/strings/str_cat.h"
#if PLACEMENT_WITH_CUDA
#include "server/device/cuda/cuda_backend.h"
#endif

namespace placement::server {

bool BuiltWithCuda() { return PLACEMENT_WITH_CUDA != 0; }

absl::StatusOr<BackendSelection> CreateBackend(const BackendOptions& options) {
  if (options.kind != "auto" && options.kind != "cpu" && options.kind != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend must be auto, cpu or cuda, got '", options.kind, "'"));
  }
  BackendSelection out;
  std::string cuda_reason = "this build has no CUDA backend (PLACEMENT_WITH_CUDA=OFF)";
#if PLACEMENT_WITH_CUDA
  if (options.kind != "cpu") {
    CudaBackendOptions cuda;
    cuda.memory_fraction = options.cuda_memory_fraction;
    cuda.process_index = options.cpu.process_index;
    cuda.logical_devices_per_gpu = options.cuda_logical_devices;
    cuda.device_memory_bytes = options.cuda_device_memory_bytes;
    auto backend = CudaBackend::Create(cuda);
    // Bad CUDA settings are the operator's error, not a reason to fall back.
    if (absl::IsInvalidArgument(backend.status())) return backend.status();
    if (backend.ok()) {
      out.note = absl::StrCat("using ", (*backend)->Devices().size(), " CUDA device(s)");
      if (options.cuda_logical_devices > 1) {
        absl::StrAppend(&out.note, " (", options.cuda_logical_devices, " logical per GPU)");
      }
      out.backend = std::move(*backend);
      return out;
    }
    cuda_reason = std::string(backend.status().message());
  }
#endif
  if (options.kind == "cuda") {
    return absl::FailedPreconditionError(
        absl::StrCat("--backend=cuda but no GPU is usable: ", cuda_reason));
  }
  auto cpu = CpuBackend::Create(options.cpu);
  if (!cpu.ok()) return cpu.status();
  if (options.kind == "auto") {
    out.note = absl::StrCat("no usable GPU (", cuda_reason, "); falling back to ",
                            (*cpu)->Devices().size(), " CPU virtual devices");
  } else {
    out.note = absl::StrCat("using ", (*cpu)->Devices().size(), " CPU virtual devices (--backend=cpu)");
  }
  out.backend = std::move(*cpu);
  return out;
}

}  // namespace placement::server
