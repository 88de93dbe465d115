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
  void Release(int64_t, void* data, int64_t) override { std::free(data); }

 private:
  std::vector<DeviceDescription> devices_;
};

HostStagedEngine::HostStagedEngine(DeviceBackend* backend, const LocalEngineOptions& options)
    : backend_(backend), host_(std::make_unique<HostMemory>()), local_(options) {}

HostStagedEngine::~HostStagedEngine() = default;

absl::Status HostStagedEngine::AllReduce(absl::Span<const CollectiveItem> items,
                                         const CollectiveContext& context) {
  return Run(CollectiveKind::kAllReduce, items, context);
}

absl::Status HostStagedEngine::AllGather(absl::Span<const CollectiveItem> items,
                                         const CollectiveContext& context) {
  return Run(CollectiveKind::kAllGather, items, context);
}

absl::Status HostStagedEngine::ReduceScatter(absl::Span<const CollectiveItem> items,
                                             const CollectiveContext& context) {
  return Run(CollectiveKind::kReduceScatter, items, context);
}

absl::Status HostStagedEngine::Broadcast(absl::Span<const CollectiveItem> items,
                                         const CollectiveContext& context) {
  return Run(CollectiveKind::kBroadcast, items, context);
}

absl::Status HostStagedEngine::Run(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                                   const CollectiveContext& context) {
  RETURN_IF_ERROR(ValidateLocalItems(kind, items));
  // Host copies of every buffer; an in-place rank (recv == send) shares one.
  std::vector<std::unique_ptr<DeviceBuffer>> staged;
  std::vector<CollectiveItem> host_items(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const CollectiveItem& item = items[i];
    CollectiveItem& host = host_items[i];
    host.dtype = item.dtype;
    host.op = item.op;
    host.root = item.root;
    for (size_t r = 0; r < item.recv.size(); ++r) {
      RETURN_IF_ERROR(context.Check());
      DeviceBuffer* host_send = nullptr;
      if (const DeviceBuffer* send = item.send[r]; send != nullptr) {
        ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> copy,
                         host_->Allocate(send->device_id(), send->size()));
        RETURN_IF_ERROR(backend_->ReadBytes(*send, 0, copy->data(), send->size()));
        host_send = copy.get();
        staged.push_back(std::move(copy));
      }
      DeviceBuffer* host_recv = host_send;
      if (item.recv[r] != item.send[r]) {
        ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> copy,
                         host_->Allocate(item.recv[r]->device_id(), item.recv[r]->size()));
        host_recv = copy.get();
        staged.push_back(std::move(copy));
      }
      host.send.push_back(host_send);
      host.recv.push_back(host_recv);
    }
  }
  RETURN_IF_ERROR(RunCollective(local_, kind, host_items, context));
  for (size_t i = 0; i < items.size(); ++i) {
    for (size_t r = 0; r < items[i].recv.size(); ++r) {
      RETURN_IF_ERROR(context.Check());
      DeviceBuffer& dst = *items[i].recv[r];
      RETURN_IF_ERROR(backend_->WriteBytes(host_items[i].recv[r]->data(), dst, 0, dst.size()));
    }
  }
  return absl::OkStatus();
}

}  // namespace placement::server
