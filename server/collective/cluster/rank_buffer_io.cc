#include "server/collective/cluster/rank_buffer_io.h"

#include <cstring>

namespace placement::server {

absl::StatusOr<const std::byte*> RankBufferIo::View(const DeviceBuffer& buffer,
                                                    std::vector<std::byte>& staging) {
  if (direct_) return static_cast<const std::byte*>(buffer.data());
  staging.resize(static_cast<size_t>(buffer.size()));
  if (absl::Status s = backend_->ReadBytes(buffer, 0, staging.data(), buffer.size()); !s.ok()) {
    return s;
  }
  return staging.data();
}

absl::Status RankBufferIo::Read(const DeviceBuffer& src, int64_t offset, std::byte* dst,
                                int64_t length) {
  if (!direct_) return backend_->ReadBytes(src, offset, dst, length);
  std::memcpy(dst, static_cast<const std::byte*>(src.data()) + offset, static_cast<size_t>(length));
  return absl::OkStatus();
}

absl::Status RankBufferIo::Write(const std::byte* src, DeviceBuffer& dst,
                                 absl::Span<const ByteRun> runs) {
  if (!direct_) return backend_->Write(src, dst, runs);
  std::byte* out = static_cast<std::byte*>(dst.data());
  for (const ByteRun& run : runs) {
    std::memcpy(out + run.dst_offset, src + run.src_offset, static_cast<size_t>(run.length));
  }
  return absl::OkStatus();
}

}  // namespace placement::server
