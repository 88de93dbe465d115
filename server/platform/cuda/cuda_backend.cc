#include "server/platform/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace placement::server {
namespace {

absl::Status CudaError(cudaError_t err, absl::string_view what) {
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorName(err), ": ", cudaGetErrorString(err)));
}

// cudaMalloc sizes are rounded to 2 MiB so cached blocks serve nearby sizes.
size_t CachedSize(int64_t bytes) {
  constexpr int64_t kGranule = int64_t{2} << 20;
  return static_cast<size_t>((bytes + kGranule - 1) / kGranule * kGranule);
}

int32_t NumaNodeOf(const std::string& pci_bus_id) {
  std::ifstream in("/sys/bus/pci/devices/" + absl::AsciiStrToLower(pci_bus_id) + "/numa_node");
  int32_t node = -1;
  if (in >> node) return node;
  return -1;
}

}  // namespace

namespace {

// Why the CUDA runtime found no device, in an operator's words: the
// runtime's own text for a host without a driver ("CUDA driver version is
// insufficient for CUDA runtime version") reads like an upgrade is due.
std::string NoDeviceReason(cudaError_t err) {
  const std::string code = cudaGetErrorName(err);
  if (err == cudaErrorInsufficientDriver) {
    int driver = 0;
    cudaDriverGetVersion(&driver);
    if (driver == 0) return absl::StrCat("no NVIDIA driver on this host (", code, ")");
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    return absl::StrCat("the NVIDIA driver supports CUDA ", driver / 1000, ".", driver % 1000 / 10,
                        ", older than this build's CUDA runtime ", runtime / 1000, ".",
                        runtime % 1000 / 10, " (", code, ")");
  }
  if (err == cudaErrorNoDevice) return absl::StrCat("no NVIDIA GPU on this host (", code, ")");
  return absl::StrCat(code, ": ", cudaGetErrorString(err));
}

}  // namespace

bool CudaDevicesPresent(std::string* reason) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (reason) *reason = NoDeviceReason(err);
    return false;
  }
  if (count == 0) {
    if (reason) *reason = "the CUDA runtime reports 0 devices";
    return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const CudaBackendOptions& options) {
  std::string reason;
  if (!CudaDevicesPresent(&reason)) {
    return absl::FailedPreconditionError(absl::StrCat("CUDA unavailable: ", reason));
  }
  if (!(options.memory_fraction > 0 && options.memory_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory_fraction must be in (0, 1], got ", options.memory_fraction));
  }
  const int32_t per_gpu = options.logical_devices_per_gpu;
  if (per_gpu < 1 || per_gpu > kMaxLocalDevices) {
    return absl::InvalidArgumentError(absl::StrCat("logical devices per GPU must be in [1, ",
                                                   kMaxLocalDevices, "], got ", per_gpu));
  }
  if (options.device_memory_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("device memory must be >= 0 bytes (0 = a share of free memory), got ",
                     options.device_memory_bytes));
  }
  if (options.cache_bytes_per_device < 0 || options.staging_bytes < 1) {
    return absl::InvalidArgumentError("cache_bytes_per_device must be >= 0 and staging_bytes >= 1");
  }
  int count = 0;
  cudaGetDeviceCount(&count);
  std::vector<int> gpus = options.gpus;
  if (gpus.empty()) {
    for (int i = 0; i < count; ++i) gpus.push_back(i);
  }
  for (size_t j = 0; j < gpus.size(); ++j) {
    if (gpus[j] < 0 || gpus[j] >= count) {
      return absl::InvalidArgumentError(absl::StrCat("GPU ", gpus[j],
                                                     " does not exist; the CUDA "
                                                     "runtime reports ",
                                                     count, " (0..", count - 1, ")"));
    }
    if (std::find(gpus.begin(), gpus.begin() + j, gpus[j]) != gpus.begin() + j) {
      return absl::InvalidArgumentError(absl::StrCat("GPU ", gpus[j], " is listed twice"));
    }
  }
  if (static_cast<int64_t>(gpus.size()) * per_gpu > kMaxLocalDevices) {
    return absl::InvalidArgumentError(absl::StrCat(gpus.size(), " GPUs x ", per_gpu,
                                                   " logical devices exceed ", kMaxLocalDevices,
                                                   " devices per process"));
  }
  std::vector<DeviceDescription> devices;
  std::vector<int> ordinals;
  for (size_t j = 0; j < gpus.size(); ++j) {
    const int i = gpus[j];
    cudaDeviceProp prop{};
    if (cudaError_t err = cudaGetDeviceProperties(&prop, i); err != cudaSuccess) {
      return CudaError(err, absl::StrCat("cudaGetDeviceProperties(", i, ")"));
    }
    if (cudaError_t err = cudaSetDevice(i); err != cudaSuccess) {
      return CudaError(err, absl::StrCat("cudaSetDevice(", i, ")"));
    }
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaError_t err = cudaMemGetInfo(&free_bytes, &total_bytes); err != cudaSuccess) {
      return CudaError(err, absl::StrCat("cudaMemGetInfo(", i, ")"));
    }
    int64_t limit =
        static_cast<int64_t>(static_cast<double>(free_bytes) * options.memory_fraction) / per_gpu;
    if (options.device_memory_bytes > 0) {
      if (options.device_memory_bytes > static_cast<int64_t>(free_bytes) / per_gpu) {
        return absl::InvalidArgumentError(
            absl::StrCat("device memory ", options.device_memory_bytes, " bytes x ", per_gpu,
                         " logical devices exceeds the ", free_bytes, " bytes free on GPU ", i));
      }
      limit = options.device_memory_bytes;
    }
    char bus_id[32] = {0};
    cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), i);
    for (int k = 0; k < per_gpu; ++k) {
      DeviceDescription d;
      d.local_index = static_cast<int32_t>(j) * per_gpu + k;
      d.id = options.process_index * kMaxLocalDevices + d.local_index;
      d.process_index = options.process_index;
      d.platform = "gpu";
      d.device_kind = prop.name;
      d.hardware_type = DetectHardwareType("gpu", prop.name);
      d.memory_total_bytes = static_cast<int64_t>(total_bytes) / per_gpu;
      d.memory_limit_bytes = limit;
      d.compute_capability = absl::StrCat(prop.major, ".", prop.minor);
      d.pci_bus_id = bus_id;
      d.numa_node = NumaNodeOf(d.pci_bus_id);
      d.multiprocessor_count = prop.multiProcessorCount;
      devices.push_back(std::move(d));
      ordinals.push_back(i);
    }
  }
  return std::unique_ptr<CudaBackend>(
      new CudaBackend(std::move(devices), std::move(ordinals), count, options));
}

struct CudaBackend::Staging {
  absl::Mutex mu;  // one transfer at a time uses the buffers and stream
  cudaStream_t stream = nullptr;
  void* pinned[2] = {nullptr, nullptr};
  cudaEvent_t done[2] = {nullptr, nullptr};
  bool ready = false;
};

CudaBackend::CudaBackend(std::vector<DeviceDescription> devices, std::vector<int> ordinals,
                         int num_gpus, const CudaBackendOptions& options)
    : BudgetedBackend(std::move(devices), options.cache_bytes_per_device),
      ordinals_(std::move(ordinals)),
      staging_bytes_(options.staging_bytes) {
  for (int g = 0; g < num_gpus; ++g) staging_.push_back(std::make_unique<Staging>());
}

CudaBackend::~CudaBackend() {
  ReleaseCache();
  for (size_t i = 0; i < staging_.size(); ++i) {
    Staging& s = *staging_[i];
    // A GPU this backend never staged through (--cuda_gpus left it to
    // another daemon) gets no context.
    if (!s.ready) continue;
    cudaSetDevice(static_cast<int>(i));
    cudaStreamSynchronize(s.stream);
    for (int k = 0; k < 2; ++k) {
      cudaFreeHost(s.pinned[k]);
      cudaEventDestroy(s.done[k]);
    }
    cudaStreamDestroy(s.stream);
  }
}

absl::StatusOr<CudaBackend::Staging*> CudaBackend::StagingFor(int ordinal) {
  Staging& s = *staging_[ordinal];
  // REQUIRES: s.mu held by the caller.
  if (s.ready) return &s;
  cudaSetDevice(ordinal);
  if (cudaError_t err = cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking);
      err != cudaSuccess) {
    return CudaError(err, "cudaStreamCreate (copy stream)");
  }
  for (int k = 0; k < 2; ++k) {
    if (cudaError_t err = cudaHostAlloc(&s.pinned[k], staging_bytes_, cudaHostAllocPortable);
        err != cudaSuccess) {
      return CudaError(err, "cudaHostAlloc (pinned staging)");
    }
    if (cudaError_t err = cudaEventCreateWithFlags(&s.done[k], cudaEventDisableTiming);
        err != cudaSuccess) {
      return CudaError(err, "cudaEventCreate");
    }
  }
  s.ready = true;
  return &s;
}

int CudaBackend::Ordinal(int64_t device_id) const {
  int idx = LocalIndex(device_id);
  return idx < 0 ? -1 : ordinals_[idx];
}

int64_t CudaBackend::BlockSize(int64_t bytes) const {
  return static_cast<int64_t>(CachedSize(bytes));
}

absl::StatusOr<void*> CudaBackend::AllocateBlock(int local_index, int64_t block_bytes) {
  cudaSetDevice(ordinals_[local_index]);
  void* data = nullptr;
  cudaError_t err = cudaMalloc(&data, static_cast<size_t>(block_bytes));
  if (err == cudaSuccess) return data;
  cudaGetLastError();  // clear the error so later runtime calls do not report it
  const std::string message = absl::StrCat("device ", Devices()[local_index].id, ": cudaMalloc of ",
                                           block_bytes, " bytes failed: ", cudaGetErrorString(err));
  return absl::ResourceExhaustedError(message);
}

void CudaBackend::FreeBlock(int local_index, void* block, int64_t) {
  ForgetExported(block);
  cudaSetDevice(ordinals_[local_index]);
  cudaFree(block);
}

absl::Status CudaBackend::Write(const void* src, DeviceBuffer& dst,
                                absl::Span<const ByteRun> runs) {
  const int ordinal = Ordinal(dst.device_id());
  Staging& staging = *staging_[ordinal];
  absl::MutexLock lock(&staging.mu);
  ASSIGN_OR_RETURN(Staging * s, StagingFor(ordinal));
  cudaSetDevice(ordinal);
  const auto* in = static_cast<const char*>(src);
  auto* out = static_cast<char*>(dst.data());
  if (pinned_.Contains(src, runs, PinnedHostRanges::HostSide::kSource)) {
    // A registered region: one DMA per run straight from it.
    for (const ByteRun& r : runs) {
      if (cudaError_t err = cudaMemcpyAsync(out + r.dst_offset, in + r.src_offset, r.length,
                                            cudaMemcpyHostToDevice, s->stream);
          err != cudaSuccess) {
        return CudaError(err, "host-to-device copy (registered region)");
      }
    }
    if (cudaError_t err = cudaStreamSynchronize(s->stream); err != cudaSuccess) {
      return CudaError(err, "host-to-device copy (registered region)");
    }
    return absl::OkStatus();
  }
  // Pieces alternate between the two pinned buffers: before refilling one,
  // wait for the DMA that last read it.
  int slot = 0;
  bool used[2] = {false, false};
  for (const ByteRun& r : runs) {
    for (int64_t done = 0; done < r.length;) {
      const int64_t n = std::min(staging_bytes_, r.length - done);
      if (used[slot]) {
        if (cudaError_t err = cudaEventSynchronize(s->done[slot]); err != cudaSuccess) {
          return CudaError(err, "host-to-device copy");
        }
      }
      std::memcpy(s->pinned[slot], in + r.src_offset + done, static_cast<size_t>(n));
      cudaError_t err = cudaMemcpyAsync(out + r.dst_offset + done, s->pinned[slot], n,
                                        cudaMemcpyHostToDevice, s->stream);
      if (err == cudaSuccess) err = cudaEventRecord(s->done[slot], s->stream);
      if (err != cudaSuccess) return CudaError(err, "host-to-device copy");
      used[slot] = true;
      slot ^= 1;
      done += n;
    }
  }
  if (cudaError_t err = cudaStreamSynchronize(s->stream); err != cudaSuccess) {
    return CudaError(err, "host-to-device copy");
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::Read(const DeviceBuffer& src, void* dst, absl::Span<const ByteRun> runs) {
  const int ordinal = Ordinal(src.device_id());
  Staging& staging = *staging_[ordinal];
  absl::MutexLock lock(&staging.mu);
  ASSIGN_OR_RETURN(Staging * s, StagingFor(ordinal));
  cudaSetDevice(ordinal);
  const auto* in = static_cast<const char*>(src.data());
  auto* out = static_cast<char*>(dst);
  if (pinned_.Contains(dst, runs, PinnedHostRanges::HostSide::kDestination)) {
    // A registered region: one DMA per run straight into it.
    for (const ByteRun& r : runs) {
      if (cudaError_t err = cudaMemcpyAsync(out + r.dst_offset, in + r.src_offset, r.length,
                                            cudaMemcpyDeviceToHost, s->stream);
          err != cudaSuccess) {
        return CudaError(err, "device-to-host copy (registered region)");
      }
    }
    if (cudaError_t err = cudaStreamSynchronize(s->stream); err != cudaSuccess) {
      return CudaError(err, "device-to-host copy (registered region)");
    }
    return absl::OkStatus();
  }
  // The DMA of piece k+1 runs while piece k is copied out of pinned memory.
  struct Pending {
    char* host = nullptr;
    int64_t length = 0;
  } pending[2];
  int slot = 0;
  auto drain = [&](int k) -> absl::Status {
    if (pending[k].length == 0) return absl::OkStatus();
    if (cudaError_t err = cudaEventSynchronize(s->done[k]); err != cudaSuccess) {
      return CudaError(err, "device-to-host copy");
    }
    std::memcpy(pending[k].host, s->pinned[k], static_cast<size_t>(pending[k].length));
    pending[k] = Pending{};
    return absl::OkStatus();
  };
  for (const ByteRun& r : runs) {
    for (int64_t done = 0; done < r.length;) {
      const int64_t n = std::min(staging_bytes_, r.length - done);
      RETURN_IF_ERROR(drain(slot));
      cudaError_t err = cudaMemcpyAsync(s->pinned[slot], in + r.src_offset + done, n,
                                        cudaMemcpyDeviceToHost, s->stream);
      if (err == cudaSuccess) err = cudaEventRecord(s->done[slot], s->stream);
      if (err != cudaSuccess) return CudaError(err, "device-to-host copy");
      pending[slot] = Pending{out + r.dst_offset + done, n};
      slot ^= 1;
      done += n;
    }
  }
  RETURN_IF_ERROR(drain(slot));
  RETURN_IF_ERROR(drain(slot ^ 1));
  return absl::OkStatus();
}

absl::Status CudaBackend::CopyOnCopyStream(int ordinal, void* dst, const void* src, int64_t size) {
  Staging& staging = *staging_[ordinal];
  absl::MutexLock lock(&staging.mu);
  ASSIGN_OR_RETURN(Staging * s, StagingFor(ordinal));
  cudaSetDevice(ordinal);
  cudaError_t err =
      cudaMemcpyAsync(dst, src, static_cast<size_t>(size), cudaMemcpyDeviceToDevice, s->stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(s->stream);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return CudaError(err, "device-to-device copy on the copy stream");
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::RegisterHostMemory(void* data, int64_t size) {
  if (size <= 0) return absl::InvalidArgumentError("cannot register an empty host range");
  if (cudaError_t err = cudaHostRegister(data, static_cast<size_t>(size), cudaHostRegisterPortable);
      err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls are unaffected
    return CudaError(err, "cudaHostRegister (region)");
  }
  pinned_.Add(data, size);
  return absl::OkStatus();
}

void CudaBackend::UnregisterHostMemory(void* data) {
  if (pinned_.Remove(data) > 0) cudaHostUnregister(data);
}

absl::Status CudaBackend::Copy(const DeviceBuffer& src, DeviceBuffer& dst,
                               absl::Span<const ByteRun> runs) {
  const int src_ordinal = Ordinal(src.device_id());
  const int dst_ordinal = Ordinal(dst.device_id());
  cudaSetDevice(dst_ordinal);
  const auto* in = static_cast<const char*>(src.data());
  auto* out = static_cast<char*>(dst.data());
  for (const ByteRun& r : runs) {
    cudaError_t err = src_ordinal == dst_ordinal
                          ? cudaMemcpyAsync(out + r.dst_offset, in + r.src_offset, r.length,
                                            cudaMemcpyDeviceToDevice, cudaStreamPerThread)
                          : cudaMemcpyPeerAsync(out + r.dst_offset, dst_ordinal, in + r.src_offset,
                                                src_ordinal, r.length, cudaStreamPerThread);
    if (err != cudaSuccess) return CudaError(err, "device-to-device copy");
  }
  if (cudaError_t err = cudaStreamSynchronize(cudaStreamPerThread); err != cudaSuccess) {
    return CudaError(err, "device-to-device copy");
  }
  return absl::OkStatus();
}

}  // namespace placement::server
