// DeviceBackend: the seam between the daemon's core and the memory of the
// devices it owns (LevelDB's Env, PjRt's client). CpuBackend is a real,
// first-class implementation (virtual devices in host memory, like XLA's
// forced host device count); CudaBackend drives GPUs through the CUDA runtime.
//
// Every byte the daemon holds on a device is a DeviceBuffer obtained from
// Allocate(); the backend accounts it against the device's budget until the
// buffer is destroyed. Platforms implement backends on BudgetedBackend
// (budgeted_backend.h), which owns the id lookup, the accounting and the
// block cache. All methods are thread-safe.
//
// Export (docs/api/views.md): a platform that can let another process on
// this host read a buffer in place implements ExportShard (CPU: a read-only
// fd of memfd-backed memory; CUDA: an IPC handle) and, for device memory a
// trainer hands in, ImportForUpload (CUDA: cudaIpcOpenMemHandle and a
// device-to-device copy). A platform whose device memory a trainer can
// write in place implements ExportWritable (CPU: a read-write fd of the
// block's memory file).
//
// Memory owners: every buffer carries the tag of whose bytes its block may
// ever hold (AllocateFor; TensorStore tags its tensors by tenant, 0 is the
// daemon's own). A freed block is only reused for an allocation of the same
// tag, so memory one tenant's trainer was given writable access to never
// holds another tenant's bytes.
#ifndef PLACEMENT_SERVER_DEVICE_DEVICE_BACKEND_H_
#define PLACEMENT_SERVER_DEVICE_DEVICE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/hardware.h"
#include "server/device/memory_owner.h"

namespace placement::server {

// Global device ids leave room for this many devices per node.
inline constexpr int64_t kMaxLocalDevices = 1024;

// While one exists on a thread, the fresh blocks that thread allocates are
// written whole by a writer outside the daemon next (an upload written in
// place): a platform may leave their pages for that writer to bring in
// instead of preparing them itself (the CPU platform populates every fresh
// memory file, on threads from 64 MiB; under this scope, where shared memory has
// 4 KiB pages, it does not, and the trainer's client fills the file partly
// with write(2), which allocates pages without zeroing or mapping them --
// docs/python.md "Cold and warm transfers"). Nests; thread-local.
class OutsideWriterScope {
 public:
  OutsideWriterScope();
  ~OutsideWriterScope();
  OutsideWriterScope(const OutsideWriterScope&) = delete;
  OutsideWriterScope& operator=(const OutsideWriterScope&) = delete;

  // Whether one exists on the calling thread.
  static bool Active();
};

// What the platform tells about one device. Fields a platform does not know
// are empty strings or -1.
struct DeviceDescription {
  int64_t id = 0;  // global id: process_index * kMaxLocalDevices + local_index
  int32_t process_index = 0;
  int32_t local_index = 0;
  std::string platform;     // "cpu" or "gpu"
  std::string device_kind;  // "cpu", "NVIDIA H100 80GB HBM3"
  HardwareType hardware_type = HardwareType::kUnknown;
  int64_t memory_total_bytes = 0;
  int64_t memory_limit_bytes = 0;  // budget the daemon may allocate
  std::string compute_capability;
  std::string pci_bus_id;
  int32_t numa_node = -1;
  int32_t multiprocessor_count = -1;
};

// A contiguous byte range to copy: `length` bytes from `src_offset` in the
// source to `dst_offset` in the destination.
struct ByteRun {
  int64_t src_offset = 0;
  int64_t dst_offset = 0;
  int64_t length = 0;
};

class DeviceBackend;

// One allocation on one device. Owned by a unique_ptr; destroying it frees
// the memory and returns it to the device's budget. Not copyable.
class DeviceBuffer {
 public:
  DeviceBuffer(DeviceBackend* backend, int64_t device_id, void* data, int64_t size,
               MemoryOwnerTag owner = kDaemonMemory)
      : backend_(backend), device_id_(device_id), data_(data), size_(size), owner_(owner) {}
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  int64_t device_id() const { return device_id_; }
  int64_t size() const { return size_; }
  // Device address (host address for CPU virtual devices). Only backends and
  // collective engines of the same platform dereference it.
  void* data() const { return data_; }
  MemoryOwnerTag owner() const { return owner_; }

 private:
  DeviceBackend* backend_;
  int64_t device_id_;
  void* data_;
  int64_t size_;
  MemoryOwnerTag owner_;
};

// A buffer's bytes made readable in place by another process on this host
// (DeviceBackend::ExportShard). Destroying it is the backend's Unexport: the
// fd is closed (a reader keeps the duplicate it received, see views.md
// "Revocation") and a private copy is freed. Not copyable.
struct ShardExport {
  ShardExport() = default;
  ~ShardExport();
  ShardExport(const ShardExport&) = delete;
  ShardExport& operator=(const ShardExport&) = delete;

  // CPU platforms: an fd opened O_RDONLY on sealed shared memory (no process
  // can write, shrink or grow it through any fd) whose bytes [offset, offset
  // + size) are the buffer's; -1 for an empty buffer or a platform that
  // exports handles. ExportWritable: an O_RDWR fd of memory sealed only
  // against shrinking and growing, of `file_size` bytes. Owned; TakeFd hands
  // it over.
  int fd = -1;
  int64_t offset = 0;
  int64_t size = 0;
  int64_t file_size = 0;
  // Platforms with device memory handles (CUDA: the 64 bytes of a
  // cudaIpcMemHandle_t); the bytes are at `offset` in that allocation.
  std::string ipc_handle;
  // The buffer could not be exported in place (a block shared with other
  // buffers, or no memory file left): `copy` holds a private copy, charged
  // against the device's budget until this export is destroyed.
  std::unique_ptr<DeviceBuffer> copy;

  bool copied() const { return copy != nullptr; }
  // The fd, which the caller now owns (-1 once taken).
  int TakeFd() {
    const int out = fd;
    fd = -1;
    return out;
  }
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  // The name of the platform that made it ("cpu", "cuda"): --backend.
  virtual absl::string_view Name() const = 0;
  // Every device, indexed by local index; ids are global.
  virtual const std::vector<DeviceDescription>& Devices() const = 0;
  // Bytes currently allocated on `device_id` (0 for unknown ids).
  virtual int64_t MemoryInUse(int64_t device_id) const = 0;
  // Bytes of freed blocks the backend keeps for reuse on `device_id`; they
  // count against the device's budget (memory_limit_bytes) besides
  // MemoryInUse, and are released before an allocation would fail.
  virtual int64_t MemoryCached(int64_t /*device_id*/) const { return 0; }
  // Bytes the live buffers of `device_id` are charged against its budget:
  // each one's block (the request rounded up as the platform allocates it)
  // plus, where device memory is host memory, a per-buffer host overhead
  // (BudgetedBackend). What the budget really bounds; MemoryInUse stays the
  // bytes asked for.
  virtual int64_t MemoryCharged(int64_t device_id) const { return MemoryInUse(device_id); }
  // What one buffer of `bytes` is charged (see MemoryCharged).
  virtual int64_t ChargeFor(int64_t bytes) const { return bytes; }
  // Gives the cached blocks freed before `cutoff` back to the platform (all
  // of them with absl::InfiniteFuture()); returns the bytes released.
  virtual int64_t ReleaseCachedBefore(absl::Time /*cutoff*/) { return 0; }
  // Gives every cached block of `owner` back to the platform (a tenant's
  // purge); returns the bytes released.
  virtual int64_t ReleaseCachedOf(MemoryOwnerTag /*owner*/) { return 0; }
  // Buffers released since start: tells a reclaimer that memory came free.
  virtual int64_t ReleasedBuffers() const { return 0; }
  // Host memory for CPU virtual devices: buffers are directly addressable.
  virtual bool HostAddressable() const = 0;

  // NOT_FOUND for an unknown device; RESOURCE_EXHAUSTED when the device's
  // budget would be exceeded by the buffer's charge (ChargeFor), naming the
  // numbers. A zero-byte allocation succeeds (and is charged its overhead).
  virtual absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(int64_t device_id,
                                                                 int64_t bytes) = 0;
  // Allocate, for bytes of `owner` (see "Memory owners" above): the block is
  // fresh or one only `owner`'s buffers held before. Default: Allocate (a
  // platform that never reuses blocks, or never hands them out writable).
  virtual absl::StatusOr<std::unique_ptr<DeviceBuffer>> AllocateFor(int64_t device_id,
                                                                    int64_t bytes,
                                                                    MemoryOwnerTag /*owner*/) {
    return Allocate(device_id, bytes);
  }

  // Host -> device: `runs` index `src` (src_offset) and `dst` (dst_offset).
  // REQUIRES: runs lie inside both. Returns once the bytes are on the device.
  virtual absl::Status Write(const void* src, DeviceBuffer& dst,
                             absl::Span<const ByteRun> runs) = 0;
  // Device -> host.
  virtual absl::Status Read(const DeviceBuffer& src, void* dst, absl::Span<const ByteRun> runs) = 0;
  // Device -> device (same or different devices of this backend).
  virtual absl::Status Copy(const DeviceBuffer& src, DeviceBuffer& dst,
                            absl::Span<const ByteRun> runs) = 0;

  // Registers host memory (a same-host region) for DMA, so that Write from
  // and Read into it skip staging. UNIMPLEMENTED where there is nothing to
  // pin (CPU virtual devices); the copy paths work either way.
  virtual absl::Status RegisterHostMemory(void* /*data*/, int64_t /*size*/) {
    return absl::UnimplementedError("this backend does not pin host memory");
  }
  // Undoes RegisterHostMemory. REQUIRES: no copy uses the memory.
  virtual void UnregisterHostMemory(void* /*data*/) {}

  // Makes `buffer`'s bytes readable by another process on this host,
  // read-only where the platform can enforce it (CPU: sealed memory and an
  // O_RDONLY fd; CUDA IPC mappings are writable at the driver level). From
  // its first export on, the buffer's block is never reused for other bytes:
  // freed, it goes back to the platform, never to the block cache, since a
  // reader may still map it. REQUIRES: the buffer outlives the export.
  // UNIMPLEMENTED where the platform cannot export; RESOURCE_EXHAUSTED when a
  // private copy is needed and does not fit the device's budget.
  virtual absl::StatusOr<std::unique_ptr<ShardExport>> ExportShard(const DeviceBuffer& /*buffer*/) {
    return absl::UnimplementedError(
        absl::StrCat("the ", Name(), " platform cannot export device memory"));
  }
  // Makes `buffer`'s bytes writable in place by another process on this
  // host (docs/api/views.md "Writing in place"), for `owner` only. The
  // writer may keep its mapping after it is done, so the block holds only
  // `owner`'s bytes for the rest of its life (AllocateFor); that it writes no
  // more is its client library's convention. FAILED_PRECONDITION when
  // buffer.owner() is not `owner` (or is kDaemonMemory), for a block already
  // exported read-only, and for a buffer the platform cannot hand out (CPU:
  // under 256 KiB or past the memory-file bound); UNIMPLEMENTED where device
  // memory cannot be written by another process. REQUIRES: the buffer
  // outlives the export.
  virtual absl::StatusOr<std::unique_ptr<ShardExport>> ExportWritable(
      const DeviceBuffer& /*buffer*/, MemoryOwnerTag /*owner*/) {
    return absl::UnimplementedError(absl::StrCat(
        "the ", Name(), " platform cannot hand out device memory for writing in place"));
  }

  // Copies `size` bytes at `offset` of device memory that another process on
  // this host exported (`handle`: a cudaIpcMemHandle_t's bytes on CUDA) into
  // `dst` from byte 0, device to device, and closes the handle again.
  // INVALID_ARGUMENT for a malformed handle or a size past `dst`;
  // UNIMPLEMENTED where the platform has no device handles (CPU platforms
  // take host memory through regions).
  virtual absl::Status ImportForUpload(absl::string_view /*handle*/, int64_t /*offset*/,
                                       int64_t /*size*/, DeviceBuffer& /*dst*/) {
    return absl::UnimplementedError(absl::StrCat(
        "the ", Name(), " platform has no device memory handles; upload through a region"));
  }

  // Renumbers the devices to first_id + local index and records the node's
  // process index: a cluster assigns dense global ids once it has formed
  // (server/cluster/cluster.h). REQUIRES: no buffer exists yet and no other
  // thread uses the backend.
  virtual absl::Status AssignGlobalIds(int64_t /*first_id*/, int32_t /*process_index*/) {
    return absl::UnimplementedError("this backend cannot renumber its devices");
  }

  // Convenience single-run forms.
  absl::Status WriteBytes(const void* src, DeviceBuffer& dst, int64_t dst_offset, int64_t length) {
    ByteRun run{0, dst_offset, length};
    return Write(src, dst, {&run, 1});
  }
  absl::Status ReadBytes(const DeviceBuffer& src, int64_t src_offset, void* dst, int64_t length) {
    ByteRun run{src_offset, 0, length};
    return Read(src, dst, {&run, 1});
  }

 protected:
  friend class DeviceBuffer;
  // Called exactly once per buffer from ~DeviceBuffer.
  virtual void Release(int64_t device_id, void* data, int64_t size, MemoryOwnerTag owner) = 0;
};

inline DeviceBuffer::~DeviceBuffer() { backend_->Release(device_id_, data_, size_, owner_); }

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DEVICE_DEVICE_BACKEND_H_
