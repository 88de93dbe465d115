#include "server/collective/transport/gloo/gloo_support.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/collective/kernels/reduce_kernels.h"
#include "server/collective/transport/gloo/gloo_ring_context.h"

namespace placement::server {

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  absl::Status s = store_->Set(key, std::string(data.begin(), data.end()));
  if (!s.ok()) throw GlooStoreFailure(std::move(s));
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  absl::StatusOr<std::string> v = store_->Get(key, Bounded(timeout_));
  if (!v.ok()) throw GlooStoreFailure(v.status());
  return std::vector<char>(v->begin(), v->end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) {
  wait(keys, GlooMilliseconds(timeout_));
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  for (const std::string& key : keys) {
    absl::StatusOr<std::string> v =
        store_->Get(key, Bounded(std::max(absl::FromChrono(timeout), timeout_)));
    if (!v.ok()) throw GlooStoreFailure(v.status());
  }
}

absl::Duration GlooStoreAdapter::Bounded(absl::Duration timeout) const {
  if (deadline_ == absl::InfiniteFuture()) return timeout;
  return std::max(absl::ZeroDuration(), std::min(timeout, deadline_ - absl::Now()));
}

absl::StatusOr<std::string> ResolveGlooAddress(const std::string& hostname) {
  struct addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* result = nullptr;
  const int rv = getaddrinfo(hostname.c_str(), nullptr, &hints, &result);
  if (rv != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve '", hostname, "': ", gai_strerror(rv)));
  }
  std::string error = "no address";
  for (struct addrinfo* rp = result; rp != nullptr; rp = rp->ai_next) {
    const int fd = socket(rp->ai_family, rp->ai_socktype, rp->ai_protocol);
    if (fd == -1) continue;
    const int bound = bind(fd, rp->ai_addr, rp->ai_addrlen);
    const int bind_errno = errno;
    close(fd);
    if (bound == -1) {
      error = absl::StrCat("bind: ", std::strerror(bind_errno));
      continue;
    }
    char numeric[NI_MAXHOST];
    if (getnameinfo(rp->ai_addr, rp->ai_addrlen, numeric, sizeof(numeric), nullptr, 0,
                    NI_NUMERICHOST) == 0) {
      freeaddrinfo(result);
      return std::string(numeric);
    }
  }
  freeaddrinfo(result);
  return absl::UnavailableError(
      absl::StrCat("no address of '", hostname, "' can be bound: ", error));
}

std::chrono::milliseconds GlooMilliseconds(absl::Duration d) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::milliseconds(absl::ToInt64Milliseconds(d)));
}

gloo::AllreduceOptions::Func GlooPairwiseReduce(DType dtype, ReduceOp op) {
  const ReduceOp combine = op == ReduceOp::kMean ? ReduceOp::kSum : op;
  return [dtype, combine](void* out, const void* a, const void* b, size_t n) {
    const std::byte* inputs[2] = {static_cast<const std::byte*>(a),
                                  static_cast<const std::byte*>(b)};
    std::byte* outputs[1] = {static_cast<std::byte*>(out)};
    ReduceInto(dtype, combine, inputs, outputs, static_cast<int64_t>(n));
  };
}

bool IsGlooTimeout(absl::string_view what) {
  const std::string lower = absl::AsciiStrToLower(what);
  return absl::StrContains(lower, "timed out") || absl::StrContains(lower, "timeout");
}

namespace {

// Gloo's application timeout on `context` (a gloo::Context or a transport
// context): a one-byte buffer of it waits 1 ms for a receive nobody posted.
template <typename Context>
void TimeOutEveryPair(Context& context) {
  char byte = 0;
  try {
    context.createUnboundBuffer(&byte, 1)->waitRecv(nullptr, std::chrono::milliseconds(1));
  } catch (const std::exception&) {
    // The timeout this causes.
  }
}

}  // namespace

void AbortGlooContext(gloo::Context& context) {
  // Every context the transport makes is a GlooRingContext: every wait
  // ends, the ones Gloo leaves waiting on a transfer cut off midway
  // included. One not connected yet has nothing to abort.
  if (auto* ring = dynamic_cast<GlooRingContext*>(&context); ring != nullptr) {
    ring->Abort("the Gloo context was aborted: a member was lost or an operation on it failed");
    return;
  }
  // Any other: its pairs fail; a transfer in progress keeps waiting.
  TimeOutEveryPair(context);
}

void FailEveryPair(gloo::transport::Context& transport) { TimeOutEveryPair(transport); }

void WaitSendOrThrow(gloo::transport::UnboundBuffer& buffer, std::chrono::milliseconds timeout,
                     const char* what) {
  if (!buffer.waitSend(timeout)) throw gloo::IoException(absl::StrCat(what, ": send aborted"));
}

void WaitRecvOrThrow(gloo::transport::UnboundBuffer& buffer, std::chrono::milliseconds timeout,
                     const char* what) {
  if (!buffer.waitRecv(timeout)) throw gloo::IoException(absl::StrCat(what, ": receive aborted"));
}

absl::Status GlooErrorStatus(absl::string_view prefix, absl::string_view what) {
  std::string message = absl::StrCat(prefix, ": ", what);
  if (IsGlooTimeout(what)) return absl::DeadlineExceededError(std::move(message));
  return absl::UnavailableError(std::move(message));
}

}  // namespace placement::server
