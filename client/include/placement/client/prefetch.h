// Prefetch pipelines (the daemon's PrefetchService; the seed's
// DevicePlacement.prefetch_to_device): host batches stream to the daemon,
// which keeps up to `buffer_size` of them staged on devices ahead of the
// consumer, so the transfer of batch k+1 overlaps the trainer's step on k.
//
// Two layers:
//
//   PrefetchToDevice(client, source, target, buffer_size)  -- the iterator
//   API. `source` yields host batches on a background thread; Next() yields
//   the device-resident batches in the same order, each exactly once:
//
//     auto it = PrefetchToDevice(*client, MyLoader(), Rule::ShardBatchDim(mesh));
//     while (true) {
//       auto batch = (*it)->Next();       // releases the previous batch
//       if (!batch.ok()) return batch.status();   // source or daemon error
//       if (!batch->has_value()) break;           // end of data
//       Step((*batch)->tensor("images").id, (*batch)->tensor("labels").id);
//     }
//
//   PrefetchStream -- the raw bidirectional stream: SendBatch from caller
//   buffers (in chunk_bytes messages), Next (or Read) ready batches, Release
//   them.
//
// Next() means the same on both: the next device batch, nullopt at the end.
//
// The protocol's one rule for clients (both layers obey it for you): a batch
// may be sent only while fewer than buffer_size sent batches are unreleased.
// Releases travel on the same stream as batch bytes, so a batch sent beyond
// that credit would sit in front of the release that makes room for it; the
// daemon rejects it with FAILED_PRECONDITION rather than deadlock. The batch
// the consumer is working on counts: with buffer_size 2 one batch is staged
// ahead of the one in use (flax's prefetch_to_device(size=2)).
//
// Every tensor a stream stages is deleted when it is released or, at the
// latest, when the stream ends (finish, error, cancel or disconnect): nothing
// a pipeline staged outlives it. Copy a tensor with TensorClient::Place to
// keep it.
//
// Thread-safety: see each class. Streams and iterators hold a reference to
// the Client (and, same-host, to its region pool): the Client must outlive
// them.
#ifndef PLACEMENT_CLIENT_PREFETCH_H_
#define PLACEMENT_CLIENT_PREFETCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "placement/client/client.h"
#include "placement/client/rules.h"
#include "placement/client/tensor_tree.h"
#include "placement/client/tensors.h"
#include "placement/client/types.h"
#include "placement/client/views.h"

namespace placement::client {

// The seed's default buffer_size.
inline constexpr int kDefaultPrefetchBufferSize = 2;

// Who releases the batches a stream staged.
enum class ReleaseMode {
  // The consumer calls Release(sequence) for each batch (the default).
  kExplicit,
  // Each Next() releases the batch the previous Next() returned (the
  // iterator API's mode).
  kOnNext,
};

struct PrefetchOptions {
  // Batches staged and unreleased at most (including the one in use).
  // 0 = kDefaultPrefetchBufferSize; negative: INVALID_ARGUMENT.
  int buffer_size = kDefaultPrefetchBufferSize;
  // Where every array of every batch goes; Rule() = the daemon's default
  // device. A batch may override it (SendBatch's `rule`).
  Rule rule;
  // Stream name: batch k's tensors are named "<name>/<k>/<key>".
  std::string name;
  // Owner recorded on every staged tensor (quotas, listing).
  std::string owner;
  ReleaseMode release = ReleaseMode::kExplicit;
  int64_t chunk_bytes = kDefaultChunkBytes;
  // Deadline for the whole stream; infinite = none.
  absl::Duration timeout = absl::InfiniteDuration();
  // kAuto: batches of 256 KiB or more travel through a ring of reusable
  // shared-memory regions when the daemon is on this host (regions.h); each
  // region is reused once the daemon reported its batch ready. kStream /
  // kRegion force a path.
  TransferPath path = TransferPath::kAuto;
  // PrefetchToDevice only: every batch also comes with a zero-copy view of
  // each of its tensors (DeviceBatch::views; views.h), opened by the
  // iterator as soon as the daemon reports the batch ready -- while the
  // consumer still works on the one before -- so Next() hands out bytes the
  // trainer reads in place. The daemon must be on this host (Next() returns
  // FAILED_PRECONDITION otherwise). A view keeps its batch's memory on the
  // daemon, counted against the stream's owner, after the batch is released
  // and until the view is destroyed: drop a batch's views before taking the
  // one after next to stay within buffer_size + 1 batches.
  bool views = false;
};

// A batch staged on devices: the daemon's tensors for each array key, in
// the order the batch listed them.
struct DeviceBatch {
  int64_t sequence = 0;  // 0, 1, 2, ... in send order
  std::vector<NamedTensor> tensors;
  // With PrefetchOptions::views: views[i] is a view of tensors[i] (its
  // shards' bytes, read-only, in this process), valid while held, also after
  // the batch was released. Empty otherwise.
  std::vector<std::shared_ptr<const TensorView>> views;

  // The tensor for `key`, or null.
  const TensorInfo* Find(absl::string_view key) const;
  // REQUIRES: `key` is one of the batch's keys.
  const TensorInfo& tensor(absl::string_view key) const;
  // As a TensorTree, to feed the seed facades (DataParallel, ...).
  TensorTree tree() const;
};

// The raw stream. One thread may call SendBatch (the producer) while another
// calls Read (the consumer); Release, Next and Cancel may be called from any
// thread. Destroying an unfinished stream cancels it (the daemon frees every
// batch it staged).
class PrefetchStream {
 public:
  // Opens the stream and sends PrefetchOpen. INVALID_ARGUMENT for a negative
  // buffer_size or chunk_bytes < 1 (checked here, before any call); the
  // daemon's rejections (NOT_FOUND unknown mesh, ...) surface on the first
  // Read or SendBatch.
  static absl::StatusOr<std::unique_ptr<PrefetchStream>> Open(const Client& client,
                                                              const PrefetchOptions& options = {});
  ~PrefetchStream();
  PrefetchStream(const PrefetchStream&) = delete;
  PrefetchStream& operator=(const PrefetchStream&) = delete;

  // Effective buffer size (0 resolved to the default).
  int buffer_size() const;

  // Sends one batch (BatchHeader, then each array's bytes in chunk_bytes
  // messages, straight from the caller's buffers) and returns its sequence
  // number. Blocks first until fewer than buffer_size sent batches are
  // unreleased. INVALID_ARGUMENT (nothing sent) when an array's bytes do not
  // match its dtype and shape ("array 'images': expected 4096 bytes for
  // f32[32,32], got 4000") or keys repeat; the daemon's status once the
  // stream has failed; FAILED_PRECONDITION after CloseSend; CANCELLED after
  // Cancel. `rule`: unset = the stream's rule.
  absl::StatusOr<int64_t> SendBatch(const std::vector<BatchArray>& arrays,
                                    const std::optional<Rule>& rule = std::nullopt);

  // Releases batch `sequence`: the daemon deletes its tensors and may read
  // the next batch. INVALID_ARGUMENT for a sequence never sent;
  // FAILED_PRECONDITION when it was already released (the daemon answers the
  // same for a batch whose ready has not been sent yet).
  absl::Status Release(int64_t sequence);
  // The consumer takes the next batch: RequestNext(), then Read() (after
  // CloseSend only Read(): the daemon delivers the rest unasked). Returns it,
  // or nullopt once the daemon sent its stats; the daemon's status on a
  // failed stream.
  absl::StatusOr<std::optional<DeviceBatch>> Next();
  // Only asks for the next batch (for a consumer that reads it later, or on
  // another thread): the n-th request (n = 0, 1, ...) asks for batch n (the
  // daemon times the wait for it: consumer stall) and, with
  // ReleaseMode::kOnNext, releases batch n-1. FAILED_PRECONDITION when batch
  // n-1 has not been read yet.
  absl::Status RequestNext();
  // Half-closes: no more batches or releases. The daemon delivers every
  // batch it read, sends its stats and finishes; tensors still unreleased
  // are then deleted.
  absl::Status CloseSend();

  // The next ready batch, in order, without asking for it (no consumer
  // stall is timed; the daemon sends batches as they are staged); nullopt
  // once the daemon sent its stats (the stream then finished OK). On a
  // failed stream: the daemon's status (every later call returns it too).
  absl::StatusOr<std::optional<DeviceBatch>> Read();
  // The daemon's stats, once Read returned nullopt.
  const std::optional<PrefetchStats>& stats() const;
  // Total time SendBatch waited for a free slot (client-side backpressure).
  absl::Duration send_blocked() const;

  // Abandons the stream; blocked calls return CANCELLED.
  void Cancel();

 private:
  struct Impl;
  explicit PrefetchStream(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A host batch as a source yields it: arrays that own their bytes.
struct HostBatch {
  struct Array {
    std::string key;
    DType dtype = DType::kUnspecified;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;  // row-major, little-endian
  };
  std::vector<Array> arrays;

  // Appends an array copied from `values`.
  template <typename T>
  HostBatch& Add(std::string key, absl::Span<const T> values, std::vector<int64_t> shape) {
    static_assert(DTypeOf<T>() != DType::kUnspecified,
                  "use Add(key, dtype, shape, bytes) for f16/bf16");
    absl::Span<const uint8_t> raw = AsBytes(values);
    arrays.push_back({std::move(key), DTypeOf<T>(), std::move(shape),
                      std::vector<uint8_t>(raw.begin(), raw.end())});
    return *this;
  }
  template <typename T>
  HostBatch& Add(std::string key, const std::vector<T>& values, std::vector<int64_t> shape) {
    return Add(std::move(key), absl::MakeConstSpan(values), std::move(shape));
  }
  HostBatch& Add(std::string key, DType dtype, std::vector<int64_t> shape,
                 std::vector<uint8_t> bytes) {
    arrays.push_back({std::move(key), dtype, std::move(shape), std::move(bytes)});
    return *this;
  }
  // Views for PrefetchStream::SendBatch; valid while this batch lives.
  std::vector<BatchArray> Views() const;
};

// Yields host batches in order: a batch, nullopt at the end of data, or an
// error, which the consumer receives after the batches before it. Called on
// the iterator's background thread, one call at a time.
using BatchSource = std::function<absl::StatusOr<std::optional<HostBatch>>()>;

// What the iterator measured on the client side, plus the daemon's stats.
struct PrefetchIteratorStats {
  int64_t batches = 0;              // yielded by Next()
  int64_t bytes = 0;                // host bytes sent
  absl::Duration consumer_stall;    // inside the Next() calls that returned a batch
  absl::Duration producer_blocked;  // producer waiting for a free slot
  absl::Duration source_time;       // inside source()
  // The daemon's figures; set once the stream finished cleanly.
  std::optional<PrefetchStats> daemon;
};

// The seed's prefetch_to_device as an iterator over device batches. The
// stream runs in ReleaseMode::kOnNext: each Next() releases the batch the
// previous Next() returned, so use a batch's tensors only until the next
// call. Not thread-safe: one consumer thread calls Next().
class PrefetchIterator {
 public:
  // Stops early when the data is not exhausted: cancels the stream (the
  // daemon frees every staged batch) and joins the background thread,
  // waiting for a source() call in progress to return.
  ~PrefetchIterator();
  PrefetchIterator(const PrefetchIterator&) = delete;
  PrefetchIterator& operator=(const PrefetchIterator&) = delete;

  // The next device batch, in source order; nullopt after the last one (the
  // stream then finished OK and stats().daemon is set). The source's error
  // is returned at its position; a daemon error (bad batch, RESOURCE_EXHAUSTED,
  // ...) by the first Next() that reads from the stream after it arrived
  // (one waiting for the producer waits for a source() call in progress to
  // return first). After an error or the end, Next() keeps returning the
  // same result.
  absl::StatusOr<std::optional<DeviceBatch>> Next();

  const PrefetchIteratorStats& stats() const;

 private:
  friend absl::StatusOr<std::unique_ptr<PrefetchIterator>> PrefetchToDevice(
      const Client& client, BatchSource source, const Rule& target, int buffer_size,
      PrefetchOptions options);
  struct Impl;
  explicit PrefetchIterator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// prefetch_to_device(iterator, device=None, buffer_size=2): starts the
// background upload and returns at once. `target` and `buffer_size` override
// options.rule and options.buffer_size (options.release is kOnNext).
// INVALID_ARGUMENT for buffer_size < 0 or an empty source.
absl::StatusOr<std::unique_ptr<PrefetchIterator>> PrefetchToDevice(
    const Client& client, BatchSource source, const Rule& target = {},
    int buffer_size = kDefaultPrefetchBufferSize, PrefetchOptions options = {});

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_PREFETCH_H_
