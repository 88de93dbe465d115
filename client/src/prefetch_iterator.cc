// PrefetchToDevice: the seed's prefetch_to_device over a PrefetchStream in
// ReleaseMode::kOnNext. A background thread pulls host batches from the source
// and sends them (blocking on the stream's credit); the consumer's Next()
// says "next" (releasing the batch it had), waits until the producer has sent
// the batch it wants or has stopped, and reads its ready message.
//
// The stream is half-closed only by the consumer, once it has seen the end:
// the daemon deletes unreleased batches when the stream finishes, and the
// consumer may still be using the last one until its next Next().
//
// With PrefetchOptions::views a second background thread, the viewer, reads
// the ready messages as the daemon sends them (one per staged batch, in
// order, unasked) and opens a view of every tensor of the batch before
// queueing it; Next() then says "next" and takes the queue's head. Opening
// views (an RPC, a descriptor hand-over, a mapping per tensor) so overlaps
// the consumer's step on the batch before. A batch enters the queue only
// after its views are open, and is released only after the consumer took the
// one after it, so a view never asks for a released batch.
#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "placement/client/device_placement.h"
#include "placement/client/prefetch.h"

namespace placement::client {

struct PrefetchIterator::Impl {
  explicit Impl(const Client& client) : client(client) {}

  const Client& client;
  BatchSource source;
  std::unique_ptr<PrefetchStream> stream;
  std::thread producer;
  std::thread viewer;  // only with views

  absl::Mutex mu;
  int64_t produced ABSL_GUARDED_BY(mu) = 0;  // batches fully sent
  bool producer_done ABSL_GUARDED_BY(mu) = false;
  absl::Status producer_status ABSL_GUARDED_BY(mu);  // source or send error
  bool stop ABSL_GUARDED_BY(mu) = false;
  int64_t bytes ABSL_GUARDED_BY(mu) = 0;
  absl::Duration source_time ABSL_GUARDED_BY(mu);
  // The viewer's batches, views open, in order; it stopped (end of stream,
  // the daemon's or a view's error in viewer_status) once viewer_done.
  std::deque<DeviceBatch> viewed ABSL_GUARDED_BY(mu);
  bool viewer_done ABSL_GUARDED_BY(mu) = false;
  absl::Status viewer_status ABSL_GUARDED_BY(mu);

  // Consumer thread only.
  int64_t taken = 0;
  bool over = false;  // `result` repeats from now on
  absl::Status result;
  PrefetchIteratorStats stats;

  void Produce() {
    while (true) {
      {
        absl::MutexLock lock(&mu);
        if (stop) break;
      }
      absl::Time start = absl::Now();
      absl::StatusOr<std::optional<HostBatch>> batch = source();
      absl::Duration spent = absl::Now() - start;
      absl::Status failure;
      int64_t batch_bytes = 0;
      bool end = false;
      if (!batch.ok()) {
        failure = batch.status();
      } else if (!batch->has_value()) {
        end = true;
      } else {
        for (const HostBatch::Array& a : (*batch)->arrays) batch_bytes += a.bytes.size();
        absl::StatusOr<int64_t> sent = stream->SendBatch((*batch)->Views());
        if (!sent.ok()) failure = sent.status();
      }
      absl::MutexLock lock(&mu);
      source_time += spent;
      if (end || !failure.ok()) {
        producer_status = failure;
        break;
      }
      ++produced;
      bytes += batch_bytes;
    }
    absl::MutexLock lock(&mu);
    producer_done = true;
  }

  // The viewer thread: reads every ready batch and opens its views.
  void View() {
    absl::Status status;
    while (true) {
      absl::StatusOr<std::optional<DeviceBatch>> batch = stream->Read();
      if (!batch.ok()) status = batch.status();
      if (!batch.ok() || !batch->has_value()) break;
      for (const NamedTensor& t : (*batch)->tensors) {
        absl::StatusOr<std::unique_ptr<TensorView>> view = TensorView::Open(client, t.tensor.id);
        if (!view.ok()) {
          status = view.status();
          break;
        }
        (*batch)->views.push_back(std::move(*view));
      }
      if (!status.ok()) {
        stream->Cancel();  // the daemon frees every staged batch
        break;
      }
      absl::MutexLock lock(&mu);
      viewed.push_back(*std::move(*batch));
    }
    absl::MutexLock lock(&mu);
    viewer_status = std::move(status);
    viewer_done = true;
  }

  // Half-closes and reads to the end of the stream (or, with views, waits
  // for the viewer to): the daemon's final status (OK with stats when
  // everything was delivered).
  absl::Status CloseStream() {
    absl::Status closed = stream->CloseSend();
    if (viewer.joinable()) {
      absl::Status cause = ViewerCauseOr(absl::OkStatus());
      viewer.join();
      if (!cause.ok()) return cause;
    } else {
      while (true) {
        absl::StatusOr<std::optional<DeviceBatch>> rest = stream->Read();
        if (!rest.ok()) return rest.status();
        if (!rest->has_value()) break;
      }
    }
    stats.daemon = stream->stats();
    return closed;
  }

  // Where Next() finds its batch: the stream, or the viewer's queue.
  absl::StatusOr<std::optional<DeviceBatch>> TakeReady() {
    if (!viewer.joinable()) return stream->Read();
    {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(
          +[](Impl* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(m->mu) {
            return !m->viewed.empty() || m->viewer_done;
          },
          this));
      if (!viewed.empty()) {
        DeviceBatch batch = std::move(viewed.front());
        viewed.pop_front();
        return std::optional<DeviceBatch>(std::move(batch));
      }
    }
    if (absl::Status cause = ViewerCauseOr(absl::OkStatus()); !cause.ok()) return cause;
    return std::optional<DeviceBatch>();
  }

  // With views, once the viewer stopped: its error when a view failed --
  // the cause of whatever the stream reports afterwards, since the viewer
  // then cancels it (FAILED_PRECONDITION from another host, say, rather
  // than CANCELLED) -- else `otherwise`. Without views, `otherwise`.
  absl::Status ViewerCauseOr(absl::Status otherwise) {
    if (!viewer.joinable()) return otherwise;
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&viewer_done));
    return viewer_status.ok() ? otherwise : viewer_status;
  }

  absl::StatusOr<std::optional<DeviceBatch>> End(absl::Status status) {
    over = true;
    result = std::move(status);
    if (result.ok()) return std::optional<DeviceBatch>();
    return result;
  }
};

PrefetchIterator::PrefetchIterator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PrefetchIterator::~PrefetchIterator() {
  bool clean;
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->stop = true;
    clean = impl_->over && impl_->result.ok();
  }
  if (!clean) impl_->stream->Cancel();
  if (impl_->producer.joinable()) impl_->producer.join();
  if (impl_->viewer.joinable()) impl_->viewer.join();
}

absl::StatusOr<std::optional<DeviceBatch>> PrefetchIterator::Next() {
  Impl& m = *impl_;
  if (m.over) {
    if (m.result.ok()) return std::optional<DeviceBatch>();
    return m.result;
  }
  absl::Time start = absl::Now();
  // "next": asks for batch `taken` and releases batch taken-1.
  if (absl::Status s = m.stream->RequestNext(); !s.ok()) {
    // The failed stream ends the viewer's loop too.
    return m.End(m.ViewerCauseOr(std::move(s)));
  }
  bool available;
  absl::Status producer_status;
  {
    absl::MutexLock lock(&m.mu);
    const int64_t wanted = m.taken;
    auto ready = [&m, wanted]() ABSL_SHARED_LOCKS_REQUIRED(m.mu) {
      return m.produced > wanted || m.producer_done;
    };
    m.mu.Await(absl::Condition(&ready));
    available = m.produced > wanted;
    producer_status = m.producer_status;
    m.stats.bytes = m.bytes;
    m.stats.source_time = m.source_time;
  }
  m.stats.producer_blocked = m.stream->send_blocked();
  if (!available) {
    // The producer stopped after `taken` batches: the end of data, the
    // source's error at this position, or a broken stream (whose status
    // the read side reports).
    absl::Status closed = m.CloseStream();
    if (!closed.ok()) return m.End(closed);
    return m.End(producer_status);
  }
  absl::StatusOr<std::optional<DeviceBatch>> batch = m.TakeReady();
  m.stats.consumer_stall += absl::Now() - start;
  if (!batch.ok()) return m.End(batch.status());
  if (!batch->has_value()) {
    return m.End(absl::UnavailableError(
        absl::StrCat("the daemon finished the prefetch stream before delivering batch ", m.taken)));
  }
  ++m.taken;
  ++m.stats.batches;
  return batch;
}

const PrefetchIteratorStats& PrefetchIterator::stats() const { return impl_->stats; }

absl::StatusOr<std::unique_ptr<PrefetchIterator>> PrefetchToDevice(const Client& client,
                                                                   BatchSource source,
                                                                   const Rule& target,
                                                                   int buffer_size,
                                                                   PrefetchOptions options) {
  if (!source) return absl::InvalidArgumentError("prefetch_to_device: the source is empty");
  options.rule = target;
  options.buffer_size = buffer_size;
  options.release = ReleaseMode::kOnNext;
  absl::StatusOr<std::unique_ptr<PrefetchStream>> stream = PrefetchStream::Open(client, options);
  if (!stream.ok()) return stream.status();
  auto impl = std::make_unique<PrefetchIterator::Impl>(client);
  impl->source = std::move(source);
  impl->stream = std::move(*stream);
  PrefetchIterator::Impl* raw = impl.get();
  impl->producer = std::thread([raw] { raw->Produce(); });
  if (options.views) impl->viewer = std::thread([raw] { raw->View(); });
  return std::unique_ptr<PrefetchIterator>(new PrefetchIterator(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<PrefetchIterator>> DevicePlacement::prefetch_to_device(
    BatchSource source, std::optional<Rule> target, int buffer_size) const {
  Rule rule = target.has_value() ? *target : Rule(Placement::Device(default_device_));
  return PrefetchToDevice(*client_, std::move(source), rule, buffer_size);
}

}  // namespace placement::client
