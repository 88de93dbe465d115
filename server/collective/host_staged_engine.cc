#include "server/collective/host_staged_engine.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace placement::server {

// Plain host memory behind the DeviceBuffer interface, so the LocalEngine
// can work on staged copies. Device ids are carried through unchanged.
class HostStagedEngine::HostMemory final : public DeviceBackend {
 public:
  absl::string_view Name() const override { return "host"; }
  const std::vector<DeviceDescription>& Devices() const override { return devices_; }
  int64_t MemoryInUse(int64_t) const override { return 0; }
  bool HostAddressable() const override { return true; }
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(int64_t device_id,
                                                         int64_t bytes) override {
    void* data = bytes > 0 ? std::malloc(static_cast<size_t>(bytes)) : nullptr;
    if (bytes > 0 && data == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("host staging for device ", device_id,
                                                       ": cannot allocate ", bytes,
                                                       " bytes of host memory"));
    }
    return std::make_unique<DeviceBuffer>(this, device_id, data, bytes);
  }
  absl::Status Write(const void* src, DeviceBuffer& dst, absl::Span<const ByteRun> runs) override {
    for (const ByteRun& r : runs) {
      std::memcpy(static_cast<char*>(dst.data()) + r.dst_offset,
                  static_cast<const char*>(src) + r.src_offset, static_cast<size_t>(r.length));
    }
    return absl::OkStatus();
  }
  absl::Status Read(const DeviceBuffer& src, void* dst, absl::Span<const ByteRun> runs) override {
    for (const ByteRun& r : runs) {
      std::memcpy(static_cast<char*>(dst) + r.dst_offset,
                  static_cast<const char*>(src.data()) + r.src_offset,
                  static_cast<size_t>(r.length));
    }
    return absl::OkStatus();
  }
  absl::Status Copy(const DeviceBuffer& src, DeviceBuffer& dst,
                    absl::Span<const ByteRun> runs) override {
    return Write(src.data(), dst, runs);
  }

 protected:
  void Release(int64_t, void* data, int64_t, MemoryOwnerTag) override { std::free(data); }

 private:
  std::vector<DeviceDescription> devices_;
};

HostStagedEngine::HostStagedEngine(DeviceBackend* backend, const LocalEngineOptions& options)
    : backend_(backend), host_(std::make_unique<HostMemory>()), local_(options) {}

HostStagedEngine::~HostStagedEngine() = default;

absl::Status HostStagedEngine::Run(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                                   const CollectiveContext& context) {
  std::vector<CollectiveItem> sorted;
  ASSIGN_OR_RETURN(items, ValidateLocalItems(kind, items, &sorted));
  // Host copies of every buffer; an in-place rank (recv == send) shares one.
  std::vector<std::unique_ptr<DeviceBuffer>> staged;
  std::vector<CollectiveItem> host_items(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const CollectiveItem& item = items[i];
    CollectiveItem& host = host_items[i];
    host.dtype = item.dtype;
    host.op = item.op;
    host.root = item.root;
    host.group = item.group;
    for (const RankBuffers& rank : item.local) {
      RETURN_IF_ERROR(context.Check());
      DeviceBuffer* host_send = nullptr;
      if (const DeviceBuffer* send = rank.send; send != nullptr) {
        ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> copy,
                         host_->Allocate(send->device_id(), send->size()));
        RETURN_IF_ERROR(backend_->ReadBytes(*send, 0, copy->data(), send->size()));
        host_send = copy.get();
        staged.push_back(std::move(copy));
      }
      DeviceBuffer* host_recv = host_send;
      if (rank.recv != rank.send) {
        ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> copy,
                         host_->Allocate(rank.recv->device_id(), rank.recv->size()));
        host_recv = copy.get();
        staged.push_back(std::move(copy));
      }
      host.local.push_back(RankBuffers{rank.rank, host_send, host_recv});
    }
  }
  RETURN_IF_ERROR(local_.Run(kind, host_items, context));
  for (size_t i = 0; i < items.size(); ++i) {
    for (size_t r = 0; r < items[i].local.size(); ++r) {
      RETURN_IF_ERROR(context.Check());
      DeviceBuffer& dst = *items[i].local[r].recv;
      RETURN_IF_ERROR(
          backend_->WriteBytes(host_items[i].local[r].recv->data(), dst, 0, dst.size()));
    }
  }
  return absl::OkStatus();
}

}  // namespace placement::server
