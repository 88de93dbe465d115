#include "client/src/call_context.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace placement::client {

absl::Duration EffectiveTimeout(absl::Duration timeout) {
  return timeout > absl::ZeroDuration() ? timeout : absl::InfiniteDuration();
}

void SetTimeout(absl::Duration timeout, grpc::ClientContext* context) {
  if (EffectiveTimeout(timeout) != absl::InfiniteDuration()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
}

absl::Status ValidateChunkBytes(int64_t chunk_bytes) {
  if (chunk_bytes < 1 || chunk_bytes > kMaxChunkBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_bytes is ", chunk_bytes, "; expected 1 to ", kMaxChunkBytes));
  }
  return absl::OkStatus();
}

}  // namespace placement::client
