// Internal helpers every typed call shares: deadlines and chunk-size limits.
// Not installed.
#ifndef PLACEMENT_CLIENT_SRC_CALL_CONTEXT_H_
#define PLACEMENT_CLIENT_SRC_CALL_CONTEXT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"

namespace placement::client {

// Largest chunk a stream sends or asks for: it must fit gRPC's default 4 MiB
// message limit with room for the message framing.
inline constexpr int64_t kMaxChunkBytes = int64_t{4} << 20;

// A timeout as ClientOptions::default_deadline means it: zero or negative
// is none (InfiniteDuration).
absl::Duration EffectiveTimeout(absl::Duration timeout);

// Sets the deadline now + `timeout` when `timeout` is positive and finite;
// leaves `context` without a deadline otherwise.
void SetTimeout(absl::Duration timeout, grpc::ClientContext* context);

// INVALID_ARGUMENT "chunk_bytes is 0; expected 1 to 4194304" outside
// [1, kMaxChunkBytes].
absl::Status ValidateChunkBytes(int64_t chunk_bytes);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_CALL_CONTEXT_H_
