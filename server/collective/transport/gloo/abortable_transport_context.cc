#include "server/collective/transport/gloo/abortable_transport_context.h"

#include <gloo/common/error.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/unbound_buffer.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "server/collective/transport/gloo/gloo_support.h"

namespace placement::server {

// The live buffers of one context and its abort. Shared by the context and
// its buffers, so either may go first. An abort is claimed first (one
// caller closes the pairs) and published only once the pairs are closed:
// until then no wait ends or throws, so no caller frees a buffer's memory
// while a pair may still write into or read from it.
class AbortableWaits {
 public:
  void Add(gloo::transport::UnboundBuffer* buffer) {
    absl::MutexLock lock(&mu_);
    buffers_.insert(buffer);
  }

  void Remove(gloo::transport::UnboundBuffer* buffer) {
    absl::MutexLock lock(&mu_);
    buffers_.erase(buffer);
  }

  // True for the first caller only: it closes the pairs, then Publishes.
  bool Claim() { return !claimed_.exchange(true); }

  // From now on every wait throws IoException(`why`); the waits in progress
  // end (their buffers' abortWaitSend / abortWaitRecv).
  void Publish(const std::string& why) {
    absl::MutexLock lock(&mu_);
    why_ = why.empty() ? "aborted" : why;
    said_ = true;
    published_.store(true, std::memory_order_release);
    for (gloo::transport::UnboundBuffer* buffer : buffers_) {
      buffer->abortWaitSend();
      buffer->abortWaitRecv();
    }
  }

  // Throws the abort's IoException once it was published (a load on the
  // path of every wait; the lock only then).
  void ThrowIfAborted() const {
    if (!published_.load(std::memory_order_acquire)) return;
    std::string why;
    {
      absl::MutexLock lock(&mu_);
      why = why_;
    }
    throw gloo::IoException(why);
  }

  // A wait that Gloo failed while an abort closes the pairs (a queued
  // transfer, which Gloo signals with its own words): the abort's words
  // instead, once published. Returns when no abort was claimed.
  void ThrowIfClaimed() const {
    if (!claimed_.load()) return;
    std::string why;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&said_));
      why = why_;
    }
    throw gloo::IoException(why);
  }

 private:
  std::atomic<bool> claimed_{false};
  std::atomic<bool> published_{false};
  mutable absl::Mutex mu_;
  absl::flat_hash_set<gloo::transport::UnboundBuffer*> buffers_ ABSL_GUARDED_BY(mu_);
  std::string why_ ABSL_GUARDED_BY(mu_);
  bool said_ ABSL_GUARDED_BY(mu_) = false;  // published_, for Await
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
    bool done = false;
    try {
      done = inner_->waitRecv(rank, timeout);
    } catch (const gloo::IoException&) {
      waits_->ThrowIfClaimed();
      throw;
    }
    waits_->ThrowIfAborted();
    return done;
  }

  bool waitSend(int* rank, std::chrono::milliseconds timeout) override {
    waits_->ThrowIfAborted();
    bool done = false;
    try {
      done = inner_->waitSend(rank, timeout);
    } catch (const gloo::IoException&) {
      waits_->ThrowIfClaimed();
      throw;
    }
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
  if (!waits_->Claim()) return;
  // Every pair first (a pair that already failed keeps its error), so that
  // no pair touches a buffer's memory once its wait has ended.
  FailEveryPair(*inner_);
  waits_->Publish(why);
}

}  // namespace placement::server
