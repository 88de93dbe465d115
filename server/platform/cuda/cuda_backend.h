// CudaBackend: the GPUs the CUDA runtime reports, with cudaMalloc'd buffers
// accounted against a per-device budget (a fraction of the memory free at
// start) and recycled through the budgeted block cache (BudgetedBackend;
// cached blocks count against the budget and are released, for every
// logical device of the GPU, before a cudaMalloc would fail). The "cuda"
// platform's backend (server/platform/cuda/). Host <-> device transfers go
// through double-buffered pinned staging on a dedicated copy stream per
// GPU, so the host-side copy of one piece overlaps the DMA of the last.
//
// Logical devices (TensorFlow's logical GPUs): with
// logical_devices_per_gpu = k, every GPU is presented as k devices with
// consecutive ids, each with its own budget (the GPU's share split evenly,
// or device_memory_bytes each) and accounting; they share the GPU's copy
// stream and staging. This lets one GPU host a mesh of several devices
// (tests, development); collectives among logical devices of one GPU cannot
// use NCCL (one rank per GPU) and run host-staged (see NcclEngine).
//
// Thread-safe. Built only when the CUDA toolkit is found.
#ifndef PLACEMENT_SERVER_PLATFORM_CUDA_CUDA_BACKEND_H_
#define PLACEMENT_SERVER_PLATFORM_CUDA_CUDA_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "server/device/budgeted_backend.h"
#include "server/device/pinned_host_ranges.h"

namespace placement::server {

struct CudaBackendOptions {
  // Fraction of each GPU's free memory at start that the daemon may use.
  double memory_fraction = 0.9;
  // Node identity, given by the daemon.
  int32_t process_index = 0;
  // Devices each GPU is presented as (>= 1).
  int32_t logical_devices_per_gpu = 1;
  // The CUDA ordinals this backend owns, in the order given (empty: every
  // GPU the runtime reports), so that several daemons can share one host, a
  // GPU set each. INVALID_ARGUMENT for an ordinal the runtime does not
  // report or one listed twice.
  std::vector<int> gpus;
  // Budget of each (logical) device in bytes; 0 = memory_fraction of the
  // GPU's free memory split evenly among its logical devices.
  // INVALID_ARGUMENT when the devices of one GPU would exceed its free memory.
  int64_t device_memory_bytes = 0;
  // Freed cudaMalloc blocks kept per device for reuse by allocations of the
  // same 2 MiB-rounded size (cudaFree synchronises the device); cached bytes
  // count against the budget, not as in use. 0 disables.
  int64_t cache_bytes_per_device = int64_t{2} << 30;
  // Pinned host staging per device: two buffers of this size, so the host
  // copy of piece k+1 overlaps the DMA of piece k.
  int64_t staging_bytes = int64_t{8} << 20;
};

class CudaBackend final : public BudgetedBackend {
 public:
  // FAILED_PRECONDITION when no driver or no GPU is present, in plain words
  // with the runtime's code ("CUDA unavailable: no NVIDIA driver on this host
  // (cudaErrorInsufficientDriver)", "... no NVIDIA GPU on this host
  // (cudaErrorNoDevice)", a driver older than the runtime with both
  // versions).
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options);
  ~CudaBackend() override;

  absl::string_view Name() const override { return "cuda"; }
  bool HostAddressable() const override { return false; }
  absl::Status Write(const void* src, DeviceBuffer& dst, absl::Span<const ByteRun> runs) override;
  absl::Status Read(const DeviceBuffer& src, void* dst, absl::Span<const ByteRun> runs) override;
  absl::Status Copy(const DeviceBuffer& src, DeviceBuffer& dst,
                    absl::Span<const ByteRun> runs) override;
  // cudaHostRegister (portable): copies from / into the memory are one DMA
  // each on the device's copy stream, without the staging buffers.
  absl::Status RegisterHostMemory(void* data, int64_t size) override;
  void UnregisterHostMemory(void* data) override;

  // CUDA IPC (cuda_ipc.cc, docs/api/views.md): an export is the buffer's
  // cudaIpcMemHandle_t (IPC mappings are writable at the driver level: the
  // client libraries expose them read-only); an import copies a writer's
  // allocation device to device on the copy stream.
  absl::StatusOr<std::unique_ptr<ShardExport>> ExportShard(const DeviceBuffer& buffer) override;
  absl::Status ImportForUpload(absl::string_view handle, int64_t offset, int64_t size,
                               DeviceBuffer& dst) override;

  // CUDA ordinal (the physical GPU) of a global device id, or -1.
  int Ordinal(int64_t device_id) const;

 protected:
  // 2 MiB-rounded cudaMalloc blocks on the device's GPU.
  int64_t BlockSize(int64_t bytes) const override;
  absl::StatusOr<void*> AllocateBlock(int local_index, int64_t block_bytes) override;
  void FreeBlock(int local_index, void* block, int64_t block_bytes) override;
  // Logical devices of one GPU share its memory.
  bool SharesMemoryWith(int a, int b) const override { return ordinals_[a] == ordinals_[b]; }
  // An exported block is freed, never cached (a reader may map it).
  bool Reusable(int local_index, void* block, int64_t block_bytes) const override;

 private:
  // A device's copy stream and double-buffered pinned staging, created on
  // first use; one transfer at a time per device uses it.
  struct Staging;

  CudaBackend(std::vector<DeviceDescription> devices, std::vector<int> ordinals, int num_gpus,
              const CudaBackendOptions& options);
  absl::StatusOr<Staging*> StagingFor(int ordinal);
  void ForgetExported(void* block);
  // `size` bytes device to device on GPU `ordinal`'s copy stream; returns
  // once they are there.
  absl::Status CopyOnCopyStream(int ordinal, void* dst, const void* src, int64_t size);

  std::vector<int> ordinals_;  // per device: its GPU
  const int64_t staging_bytes_;
  std::vector<std::unique_ptr<Staging>> staging_;  // per GPU
  PinnedHostRanges pinned_;                        // RegisterHostMemory'd
  mutable absl::Mutex exported_mu_;
  absl::flat_hash_set<void*> exported_ ABSL_GUARDED_BY(exported_mu_);  // blocks ever exported
};

// True when the CUDA runtime reports at least one device (no side effects
// beyond initializing the runtime). `reason` receives why not.
bool CudaDevicesPresent(std::string* reason);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PLATFORM_CUDA_CUDA_BACKEND_H_
