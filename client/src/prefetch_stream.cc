// Client side of PrefetchService.Prefetch over gRPC's synchronous
// bidirectional stream: one producer thread writes batches, one consumer
// thread reads ready batches, and release/next messages from any thread are
// slotted in between the producer's chunks (a control queue flushed by
// whoever holds the write lock), so a release never waits behind a batch.
// The credit rule (at most buffer_size sent batches unreleased) is kept here.
#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/src/call_context.h"
#include "client/src/client_impl.h"
#include "client/src/convert.h"
#include "client/src/parallel_copy.h"
#include "client/src/region_pool.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "placement/client/prefetch.h"
#include "placement/v1/prefetch_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;
namespace {

absl::Status CheckArrays(const std::vector<BatchArray>& arrays) {
  absl::flat_hash_set<std::string> keys;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const BatchArray& a = arrays[i];
    if (!keys.insert(a.key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("arrays[", i, "]: key '", a.key, "' appears twice in the batch"));
    }
    absl::StatusOr<int64_t> expected = ExpectedBytes(a.array.dtype, a.array.shape);
    if (!expected.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("array '", a.key, "': ", expected.status().message()));
    }
    if (static_cast<int64_t>(a.array.data.size()) != *expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("array '", a.key, "': expected ", *expected, " bytes for ",
                       DescribeArray(a.array.dtype, a.array.shape), ", got ", a.array.data.size()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const TensorInfo* DeviceBatch::Find(absl::string_view key) const {
  for (const NamedTensor& t : tensors) {
    if (t.key == key) return &t.tensor;
  }
  return nullptr;
}

const TensorInfo& DeviceBatch::tensor(absl::string_view key) const {
  const TensorInfo* found = Find(key);
  if (found == nullptr) {
    static const TensorInfo* const kMissing = new TensorInfo();
    return *kMissing;
  }
  return *found;
}

TensorTree DeviceBatch::tree() const {
  TensorTree tree;
  for (const NamedTensor& t : tensors) tree.emplace(t.key, TensorHandle(t.tensor));
  return tree;
}

std::vector<BatchArray> HostBatch::Views() const {
  std::vector<BatchArray> views;
  views.reserve(arrays.size());
  for (const Array& a : arrays) {
    views.push_back({a.key, HostArray{a.dtype, a.shape, absl::MakeConstSpan(a.bytes)}});
  }
  return views;
}

struct PrefetchStream::Impl {
  PrefetchOptions options;
  int buffer_size = kDefaultPrefetchBufferSize;

  // Declaration order matters: the stream refers to the context and stub.
  std::unique_ptr<pb::PrefetchService::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<pb::PrefetchRequest, pb::PrefetchResponse>> stream;

  // Held around every stream->Write / WritesDone / Finish.
  absl::Mutex write_mu ABSL_ACQUIRED_BEFORE(mu);
  // Held around stream->Read, so that one thread at a time reads.
  absl::Mutex read_mu ABSL_ACQUIRED_BEFORE(write_mu);

  mutable absl::Mutex mu;
  int64_t sent ABSL_GUARDED_BY(mu) = 0;   // batch headers handed to the writer
  int64_t reads ABSL_GUARDED_BY(mu) = 0;  // ready batches read
  int64_t nexts ABSL_GUARDED_BY(mu) = 0;  // batches RequestNext() asked for
  std::set<int64_t> unreleased ABSL_GUARDED_BY(mu);
  std::deque<pb::PrefetchRequest> control ABSL_GUARDED_BY(mu);  // awaiting the write lock
  bool send_closed ABSL_GUARDED_BY(mu) = false;
  bool cancelled ABSL_GUARDED_BY(mu) = false;
  bool broken ABSL_GUARDED_BY(mu) = false;    // a write failed or the read side ended
  bool finished ABSL_GUARDED_BY(mu) = false;  // stream->Finish ran
  absl::Status final_status ABSL_GUARDED_BY(mu);
  std::optional<PrefetchStats> stats;  // written once, before `finished`
  // The region ring (TransferPath): a batch sent through a region holds it
  // until the daemon reports the batch ready (it has read every byte then)
  // or the stream ends; the pool hands it to the next batch.
  std::shared_ptr<RegionPool> pool;  // null under kStream
  std::map<int64_t, RegionPool::Lease> staged ABSL_GUARDED_BY(mu);
  absl::Duration send_blocked ABSL_GUARDED_BY(mu);

  bool Stopped() const ABSL_SHARED_LOCKS_REQUIRED(mu) { return cancelled || broken || finished; }

  // Writes queued control messages, then `message` (if any). False when the
  // stream is dead.
  bool WriteLocked(const pb::PrefetchRequest* message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu) {
    while (true) {
      pb::PrefetchRequest next;
      {
        absl::MutexLock lock(&mu);
        if (finished) return false;
        if (control.empty()) break;
        next = std::move(control.front());
        control.pop_front();
      }
      if (!stream->Write(next)) return MarkBroken();
    }
    if (message != nullptr && !stream->Write(*message)) return MarkBroken();
    return true;
  }

  bool MarkBroken() {
    absl::MutexLock lock(&mu);
    broken = true;
    return false;
  }

  // Checks that a control message may be sent. REQUIRES: mu held.
  absl::Status CanSendControlLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu) {
    if (cancelled) return absl::CancelledError("the prefetch stream was cancelled");
    if (send_closed) {
      return absl::FailedPreconditionError("the prefetch stream was closed for sending");
    }
    return absl::OkStatus();
  }

  // Queues a `next` (credit for one more ready message): FAILED_PRECONDITION
  // while the last one asked for was not read yet, or the stream is closed
  // for sending; CANCELLED once cancelled. FlushControl sends it.
  absl::Status QueueNext() {
    absl::MutexLock lock(&mu);
    if (absl::Status s = CanSendControlLocked(); !s.ok()) return s;
    const int64_t n = nexts;
    if (n > reads) {
      return absl::FailedPreconditionError(
          absl::StrCat("RequestNext() asks for batch ", n, " before batch ", n - 1, " was read"));
    }
    if (options.release == ReleaseMode::kOnNext && n >= 1) unreleased.erase(n - 1);
    ++nexts;
    pb::PrefetchRequest message;
    message.mutable_next();
    control.push_back(std::move(message));
    return absl::OkStatus();
  }

  // Flushes the control queue (waiting at most for the chunk being written).
  // Callers queue their message in the same critical section that updates
  // the credit, so the producer can never write a batch header that the
  // release making room for it has not preceded.
  absl::Status FlushControl() {
    bool ok;
    {
      absl::MutexLock lock(&write_mu);
      ok = WriteLocked(nullptr);
    }
    return ok ? absl::OkStatus() : FinalStatus();
  }

  // Reads until the stream ends and finishes it. REQUIRES: read_mu held.
  void DrainAndFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(read_mu) {
    {
      absl::MutexLock lock(&mu);
      if (finished) return;
    }
    pb::PrefetchResponse response;
    while (stream->Read(&response)) {
      if (response.has_stats()) stats = FromProto(response.stats());
    }
    absl::MutexLock wlock(&write_mu);
    grpc::Status status = stream->Finish();
    absl::MutexLock lock(&mu);
    finished = true;
    broken = true;
    staged.clear();  // the daemon reads no more
    final_status = FromGrpcStatus(status);
    if (final_status.ok() && !stats.has_value()) {
      final_status = absl::UnavailableError("the daemon ended the prefetch stream without stats");
    }
  }

  // The stream's final status once it is dead (reads what is left).
  absl::Status FinalStatus() {
    absl::MutexLock rlock(&read_mu);
    DrainAndFinishLocked();
    absl::MutexLock lock(&mu);
    if (cancelled && final_status.ok())
      return absl::CancelledError("the prefetch stream was cancelled");
    return final_status.ok() ? absl::FailedPreconditionError("the prefetch stream has ended")
                             : final_status;
  }
};

PrefetchStream::PrefetchStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PrefetchStream::~PrefetchStream() {
  bool finished;
  {
    absl::MutexLock lock(&impl_->mu);
    finished = impl_->finished;
    impl_->cancelled = true;
  }
  if (!finished) {
    impl_->context.TryCancel();
    absl::MutexLock rlock(&impl_->read_mu);
    impl_->DrainAndFinishLocked();
  }
}

absl::StatusOr<std::unique_ptr<PrefetchStream>> PrefetchStream::Open(
    const Client& client, const PrefetchOptions& options) {
  if (options.buffer_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("buffer_size is ", options.buffer_size,
                                                   "; must be >= 1 (0 selects the default ",
                                                   kDefaultPrefetchBufferSize, ")"));
  }
  if (absl::Status chunk_ok = ValidateChunkBytes(options.chunk_bytes); !chunk_ok.ok()) {
    return chunk_ok;
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->buffer_size = options.buffer_size == 0 ? kDefaultPrefetchBufferSize : options.buffer_size;
  client.impl().Prepare(&impl->context, options.timeout);
  if (options.path != TransferPath::kStream) impl->pool = RegionPool::For(client);
  impl->stub = pb::PrefetchService::NewStub(client.impl().channel);
  impl->stream = impl->stub->Prefetch(&impl->context);
  pb::PrefetchRequest open;
  pb::PrefetchOpen* o = open.mutable_open();
  o->set_buffer_size(options.buffer_size);
  if (!options.rule.is_default()) *o->mutable_rule() = ToProto(options.rule);
  o->set_name(options.name);
  o->set_auto_release(options.release == ReleaseMode::kOnNext);
  std::unique_ptr<PrefetchStream> stream(new PrefetchStream(std::move(impl)));
  bool ok;
  {
    absl::MutexLock lock(&stream->impl_->write_mu);
    ok = stream->impl_->WriteLocked(&open);
  }
  if (!ok) return stream->impl_->FinalStatus();
  return stream;
}

int PrefetchStream::buffer_size() const { return impl_->buffer_size; }

absl::StatusOr<int64_t> PrefetchStream::SendBatch(const std::vector<BatchArray>& arrays,
                                                  const std::optional<Rule>& rule) {
  if (absl::Status s = CheckArrays(arrays); !s.ok()) return s;
  Impl& m = *impl_;
  // Through a region of the ring when the path allows (decided before
  // waiting: a forced region on a remote daemon fails here).
  std::optional<RegionPool::Lease> lease;
  if (m.pool != nullptr) {
    int64_t total = 0;
    for (const BatchArray& a : arrays) total += static_cast<int64_t>(a.array.data.size());
    absl::StatusOr<bool> use = m.pool->UseRegion(m.options.path, total);
    if (!use.ok()) return use.status();
    if (*use) {
      absl::StatusOr<RegionPool::Lease> borrowed = m.pool->Borrow(total);
      if (borrowed.ok()) {
        lease = *std::move(borrowed);
      } else if (m.options.path != TransferPath::kAuto) {
        return borrowed.status();
      }
    }
  }
  // The batch's bytes go into its region before waiting for credit: that
  // copy overlaps the consumer's use of the batches ahead, and once credit
  // comes only the daemon's one copy out of the region remains.
  std::vector<pb::PrefetchRequest> slices;
  if (lease.has_value()) {
    // One region slice per array, all in the batch's region.
    const SharedRegion& region = lease->region();
    int64_t offset = 0;
    for (size_t i = 0; i < arrays.size(); ++i) {
      absl::Span<const uint8_t> bytes = arrays[i].array.data;
      if (bytes.empty()) continue;
      ParallelCopy(region.data() + offset, bytes.data(), bytes.size());
      pb::BatchChunk* slice = slices.emplace_back().mutable_chunk();
      slice->set_array_index(static_cast<int32_t>(i));
      slice->mutable_region()->set_region_id(region.id());
      slice->mutable_region()->set_offset(offset);
      slice->mutable_region()->set_size(static_cast<int64_t>(bytes.size()));
      offset += static_cast<int64_t>(bytes.size());
    }
  }
  int64_t sequence = -1;
  {
    absl::MutexLock lock(&m.mu);
    auto can_send = [&m]() ABSL_SHARED_LOCKS_REQUIRED(m.mu) {
      return m.Stopped() || m.send_closed || static_cast<int>(m.unreleased.size()) < m.buffer_size;
    };
    absl::Time start = absl::Now();
    m.mu.Await(absl::Condition(&can_send));
    m.send_blocked += absl::Now() - start;
    if (m.cancelled) return absl::CancelledError("the prefetch stream was cancelled");
    if (m.send_closed) {
      return absl::FailedPreconditionError("SendBatch after CloseSend on the prefetch stream");
    }
    if (!m.broken && !m.finished) {
      sequence = m.sent++;
      m.unreleased.insert(sequence);
    }
  }
  if (sequence < 0) return m.FinalStatus();

  pb::PrefetchRequest message;
  pb::BatchHeader* header = message.mutable_batch();
  for (const BatchArray& a : arrays) {
    pb::ArrayHeader* h = header->add_arrays();
    h->set_key(a.key);
    h->set_dtype(ToProto(a.array.dtype));
    for (int64_t d : a.array.shape) h->add_shape(d);
  }
  const Rule& effective = rule.has_value() ? *rule : m.options.rule;
  if (rule.has_value() && !effective.is_default()) *header->mutable_rule() = ToProto(effective);
  header->set_owner(m.options.owner);
  bool ok;
  {
    absl::MutexLock lock(&m.write_mu);
    ok = m.WriteLocked(&message);
  }
  if (lease.has_value()) {
    {
      absl::MutexLock lock(&m.mu);
      m.staged.emplace(sequence, *std::move(lease));
    }
    for (size_t i = 0; ok && i < slices.size(); ++i) {
      absl::MutexLock lock(&m.write_mu);
      ok = m.WriteLocked(&slices[i]);
    }
    if (!ok) return m.FinalStatus();
    return sequence;
  }
  // Chunks, each under its own write lock so releases can slip in between.
  pb::BatchChunk* chunk = message.mutable_chunk();
  std::string* data = chunk->mutable_data();
  data->reserve(static_cast<size_t>(std::min<int64_t>(m.options.chunk_bytes, kMaxChunkBytes)));
  for (size_t i = 0; ok && i < arrays.size(); ++i) {
    absl::Span<const uint8_t> bytes = arrays[i].array.data;
    chunk->set_array_index(static_cast<int32_t>(i));
    for (size_t offset = 0; ok && offset < bytes.size();) {
      size_t n = std::min<size_t>(bytes.size() - offset, m.options.chunk_bytes);
      data->assign(reinterpret_cast<const char*>(bytes.data() + offset), n);
      offset += n;
      absl::MutexLock lock(&m.write_mu);
      ok = m.WriteLocked(&message);
    }
  }
  if (!ok) return m.FinalStatus();
  return sequence;
}

absl::Status PrefetchStream::Release(int64_t sequence) {
  Impl& m = *impl_;
  {
    absl::MutexLock lock(&m.mu);
    if (sequence < 0 || sequence >= m.sent) {
      return absl::InvalidArgumentError(
          absl::StrCat("release of batch ", sequence, ": no such batch (", m.sent, " sent)"));
    }
    if (sequence >= m.reads) {
      return absl::FailedPreconditionError(
          absl::StrCat("release of batch ", sequence, ": it has not been read yet"));
    }
    if (!m.unreleased.contains(sequence)) {
      return absl::FailedPreconditionError(
          absl::StrCat("release of batch ", sequence, ": it was already released"));
    }
    if (absl::Status s = m.CanSendControlLocked(); !s.ok()) return s;
    m.unreleased.erase(sequence);
    pb::PrefetchRequest message;
    message.mutable_release()->set_sequence(sequence);
    m.control.push_back(std::move(message));
  }
  return m.FlushControl();
}

absl::Status PrefetchStream::RequestNext() {
  if (absl::Status queued = impl_->QueueNext(); !queued.ok()) return queued;
  return impl_->FlushControl();
}

absl::StatusOr<std::optional<DeviceBatch>> PrefetchStream::Next() {
  bool send_closed;
  {
    absl::MutexLock lock(&impl_->mu);
    if (impl_->finished) {
      if (impl_->final_status.ok()) return std::optional<DeviceBatch>();
      return impl_->final_status;
    }
    send_closed = impl_->send_closed;
  }
  // Half-closed: the daemon sends the batches it still holds unasked.
  if (send_closed) return Read();
  // Refused before anything was asked (a batch asked and not read yet, a
  // cancelled stream): nothing to read either -- reading would take the
  // batch another caller asked for.
  if (absl::Status queued = impl_->QueueNext(); !queued.ok()) return queued;
  if (absl::Status flushed = impl_->FlushControl(); !flushed.ok()) {
    // A broken stream: Read reports the daemon's status.
    absl::StatusOr<std::optional<DeviceBatch>> read = Read();
    if (!read.ok()) return read.status();
    return flushed;
  }
  return Read();
}

absl::Status PrefetchStream::CloseSend() {
  Impl& m = *impl_;
  {
    absl::MutexLock lock(&m.mu);
    if (m.cancelled) return absl::CancelledError("the prefetch stream was cancelled");
    if (m.send_closed) return absl::OkStatus();
  }
  bool ok;
  {
    absl::MutexLock lock(&m.write_mu);
    ok = m.WriteLocked(nullptr);
    {
      absl::MutexLock lock2(&m.mu);
      m.send_closed = true;
      ok = ok && !m.finished;
    }
    if (ok) ok = m.stream->WritesDone();
  }
  return ok ? absl::OkStatus() : m.FinalStatus();
}

absl::StatusOr<std::optional<DeviceBatch>> PrefetchStream::Read() {
  Impl& m = *impl_;
  absl::MutexLock rlock(&m.read_mu);
  {
    absl::MutexLock lock(&m.mu);
    if (m.finished) {
      if (m.final_status.ok()) return std::optional<DeviceBatch>();
      return m.final_status;
    }
  }
  pb::PrefetchResponse response;
  while (m.stream->Read(&response)) {
    if (response.has_stats()) {
      m.stats = FromProto(response.stats());
      continue;
    }
    if (!response.has_ready()) continue;
    absl::MutexLock lock(&m.mu);
    if (response.ready().sequence() != m.reads) {
      m.context.TryCancel();
      m.broken = true;
      m.final_status =
          absl::InternalError(absl::StrCat("the daemon sent batch ", response.ready().sequence(),
                                           " where batch ", m.reads, " was due"));
      break;
    }
    ++m.reads;
    // The daemon read every byte of the batch: its region goes back to the ring.
    m.staged.erase(response.ready().sequence());
    DeviceBatch batch;
    batch.sequence = response.ready().sequence();
    batch.tensors = FromProtos(response.ready().tensors());
    return std::optional<DeviceBatch>(std::move(batch));
  }
  absl::Status internal;
  {
    absl::MutexLock lock(&m.mu);
    internal = m.final_status;
  }
  m.DrainAndFinishLocked();
  absl::MutexLock lock(&m.mu);
  if (!internal.ok()) m.final_status = internal;
  if (m.final_status.ok()) return std::optional<DeviceBatch>();
  if (m.cancelled && m.final_status.code() == absl::StatusCode::kCancelled) {
    return absl::CancelledError("the prefetch stream was cancelled");
  }
  return m.final_status;
}

const std::optional<PrefetchStats>& PrefetchStream::stats() const { return impl_->stats; }

absl::Duration PrefetchStream::send_blocked() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->send_blocked;
}

void PrefetchStream::Cancel() {
  {
    absl::MutexLock lock(&impl_->mu);
    impl_->cancelled = true;
  }
  impl_->context.TryCancel();
}

}  // namespace placement::client
