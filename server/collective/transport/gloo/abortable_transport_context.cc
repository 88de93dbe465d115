#include "server/collective/transport/gloo/abortable_transport_context.h"

#include <gloo/common/error.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace placement::server {

// The live buffers of one context and whether it was aborted. Shared by the
// context and its buffers, so either may go first.
class AbortableWaits {
 public:
  void Add(gloo::transport::UnboundBuffer* buffer) {
    absl::MutexLock lock(&mu_);
    buffers_.insert(buffer);
    // A buffer made after the abort: its waits end at once.
    if (!why_.empty()) EndWaits(buffer);
  }

  void Remove(gloo::transport::UnboundBuffer* buffer) {
    absl::MutexLock lock(&mu_);
    buffers_.erase(buffer);
  }

  // Returns false when an abort came first (its message stays).
  bool Abort(const std::string& why) {
    absl::MutexLock lock(&mu_);
    if (!why_.empty()) return false;
    why_ = why.empty() ? "aborted" : why;
    return true;
  }

  // Ends the wait of every live buffer (after the pairs closed: nothing
  // writes into or reads from their memory any more).
  void EndAllWaits() {
    absl::MutexLock lock(&mu_);
    for (gloo::transport::UnboundBuffer* buffer : buffers_) EndWaits(buffer);
  }

  // Throws the abort's IoException if there was one.
  void ThrowIfAborted() const {
    std::string why;
    {
      absl::MutexLock lock(&mu_);
      why = why_;
    }
    if (!why.empty()) throw gloo::IoException(why);
  }

  bool aborted() const {
    absl::MutexLock lock(&mu_);
    return !why_.empty();
  }

 private:
  static void EndWaits(gloo::transport::UnboundBuffer* buffer) {
    buffer->abortWaitSend();
    buffer->abortWaitRecv();
  }

  mutable absl::Mutex mu_;
  absl::flat_hash_set<gloo::transport::UnboundBuffer*> buffers_ ABSL_GUARDED_BY(mu_);
  std::string why_ ABSL_GUARDED_BY(mu_);
};

namespace {

// Gloo's TCP unbound buffer, registered with its context's waits while it
// lives. Every operation goes to Gloo's buffer, which hands itself (not
// this wrapper) to the pairs.
class AbortableUnboundBuffer final : public gloo::transport::UnboundBuffer {
 public:
  AbortableUnboundBuffer(std::unique_ptr<gloo::transport::UnboundBuffer> inner,
                         std::shared_ptr<AbortableWaits> waits)
      : gloo::transport::UnboundBuffer(inner->ptr, inner->size),
        inner_(std::move(inner)),
        waits_(std::move(waits)) {
    waits_->Add(inner_.get());
  }

  ~AbortableUnboundBuffer() override { waits_->Remove(inner_.get()); }

  bool waitRecv(int* rank, std::chrono::milliseconds timeout) override {
    waits_->ThrowIfAborted();
    const bool done = inner_->waitRecv(rank, timeout);
    waits_->ThrowIfAborted();
    return done;
  }

  bool waitSend(int* rank, std::chrono::milliseconds timeout) override {
    waits_->ThrowIfAborted();
    const bool done = inner_->waitSend(rank, timeout);
    waits_->ThrowIfAborted();
    return done;
  }

  void abortWaitRecv() override { inner_->abortWaitRecv(); }
  void abortWaitSend() override { inner_->abortWaitSend(); }

  void send(int dst_rank, uint64_t slot, size_t offset, size_t nbytes) override {
    inner_->send(dst_rank, slot, offset, nbytes);
  }

  void recv(int src_rank, uint64_t slot, size_t offset, size_t nbytes) override {
    inner_->recv(src_rank, slot, offset, nbytes);
  }

  void recv(std::vector<int> src_ranks, uint64_t slot, size_t offset, size_t nbytes) override {
    inner_->recv(std::move(src_ranks), slot, offset, nbytes);
  }

 private:
  const std::unique_ptr<gloo::transport::UnboundBuffer> inner_;
  const std::shared_ptr<AbortableWaits> waits_;
};

}  // namespace

AbortableTransportContext::AbortableTransportContext(
    std::shared_ptr<gloo::transport::Context> inner)
    : gloo::transport::Context(inner->rank, inner->size),
      inner_(std::move(inner)),
      waits_(std::make_shared<AbortableWaits>()) {
  setTimeout(inner_->getTimeout());
}

AbortableTransportContext::~AbortableTransportContext() = default;

std::unique_ptr<gloo::transport::Pair>& AbortableTransportContext::getPair(int rank) {
  return inner_->getPair(rank);
}

std::unique_ptr<gloo::transport::Pair>& AbortableTransportContext::createPair(int rank) {
  return inner_->createPair(rank);
}

std::unique_ptr<gloo::transport::UnboundBuffer> AbortableTransportContext::createUnboundBuffer(
    void* ptr, size_t size) {
  return std::make_unique<AbortableUnboundBuffer>(inner_->createUnboundBuffer(ptr, size), waits_);
}

void AbortableTransportContext::Abort(const std::string& why) {
  if (!waits_->Abort(why)) return;
  // Every pair first, so that no pair touches a buffer's memory once its
  // wait has ended. Gloo has no public abort: an application-side timeout
  // is its one way to fail every pair of a context (a pair that already
  // failed keeps its error). A buffer of the inner context (not registered)
  // that waits 1 ms for a receive nobody posted is such a timeout.
  char byte = 0;
  try {
    inner_->createUnboundBuffer(&byte, 1)->waitRecv(nullptr, std::chrono::milliseconds(1));
  } catch (const std::exception&) {
    // The timeout this causes.
  }
  waits_->EndAllWaits();
}

bool AbortableTransportContext::aborted() const { return waits_->aborted(); }

}  // namespace placement::server
