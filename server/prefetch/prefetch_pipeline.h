// PrefetchPipeline: the state of one prefetch stream (seed
// DevicePlacement.prefetch_to_device), independent of gRPC. The transport
// (server/service/prefetch_handler.cc) feeds it the client's messages and
// writes the outputs it hands back; it decides what is admitted, staged,
// delivered, released and freed.
//
// Protocol (see proto/placement/v1/prefetch_service.proto and
// docs/api/prefetch.md):
//
//   * Held batches = batches admitted (header read) and not yet released,
//     including the one being received and the one the consumer is using.
//     A batch header is admitted only while held < buffer_size. Releases
//     travel on the same stream as batch bytes, so a client must not send a
//     batch beyond that credit (it would sit in front of the release that
//     makes room for it); a header that arrives with the buffer full fails
//     the stream with FAILED_PRECONDITION instead of deadlocking it. Device
//     memory is thus bounded by buffer_size batches at all times.
//   * A batch's arrays are staged through the tensor service's
//     BatchUploadSession (every shard allocated at the header, each chunk
//     scattered as it arrives) and committed as soon as its last byte
//     arrived; its ready output follows, strictly in sequence order.
//   * Release: explicit (Release) or, in auto_release mode, by Next: the
//     n-th Next (n = 0, 1, ...) asks for batch n and releases batch n-1.
//     Both require the batch to have been delivered (its ready handed out).
//     In either mode Next starts the consumer-stall clock for batch n.
//     Releasing deletes the batch's tensors from the store, so the device
//     memory goes back to the backend at once. Recycling is the backend's:
//     the CPU backend's per-device block cache hands the pages to the next
//     batch of the same size; the pipeline keeps no staging buffers of its
//     own (chunks are scattered straight into the shards).
//   * End: after OnInputDone (the client half-closed) every admitted batch is
//     delivered, then the stats output; the stream then finishes OK. Close()
//     deletes every tensor still unreleased: nothing a pipeline staged
//     outlives its stream, whatever the ending (OK, error, cancel, shutdown).
//
// Errors name the batch: "batch 3: array 1 'labels': expected 32 bytes for
// i32[8], got 28" (INVALID_ARGUMENT); RESOURCE_EXHAUSTED / NOT_FOUND from
// allocation and rule resolution keep their codes. After any error the
// transport must Close() the pipeline and finish the stream with it.
//
// Thread-compatible: the transport serializes every call.
#ifndef PLACEMENT_SERVER_PREFETCH_PREFETCH_PIPELINE_H_
#define PLACEMENT_SERVER_PREFETCH_PREFETCH_PIPELINE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/prefetch/prefetch_metrics.h"
#include "server/tensor/batch_upload_session.h"
#include "server/tensor/placement_rule.h"
#include "server/tensor/tensor_ops.h"

namespace placement::server {

// What the client asked for in PrefetchOpen (converted and validated at
// the edge, server/service/from_proto.h).
struct PrefetchConfig {
  int buffer_size = 2;
  PlacementRule rule;  // unset = the default device
  std::string name;
  bool auto_release = false;
  // The caller's tenant: every batch's tensors belong to it.
  std::string tenant;
};

// One batch header (BatchHeader on the wire).
struct PrefetchBatchHeader {
  // The batch's arrays, or why the wire header is malformed -- its arrays,
  // rule, or a name or owner too long (INVALID_ARGUMENT naming the array or
  // field; from_proto checks them all): the pipeline reports it after its
  // own stream-state checks, with the batch number.
  absl::StatusOr<std::vector<BatchArraySpec>> arrays;
  PlacementRule rule;  // unset = the stream's rule
  std::string name;    // empty = "<stream name>/<sequence>" when the stream has a name
  std::string owner;
};

// One output for the transport to write, in order.
struct PrefetchOutput {
  struct Ready {
    int64_t sequence = 0;
    std::vector<std::pair<std::string, std::shared_ptr<const Tensor>>> tensors;  // header order
  };
  // Exactly one is set.
  std::optional<Ready> ready;
  std::optional<PrefetchStats> stats;
};

class PrefetchPipeline {
 public:
  // REQUIRES: ops and metrics (may be null) outlive the pipeline.
  PrefetchPipeline(const TensorOps* ops, PrefetchConfig config, PrefetchMetrics* metrics);
  ~PrefetchPipeline();  // Close()
  PrefetchPipeline(const PrefetchPipeline&) = delete;
  PrefetchPipeline& operator=(const PrefetchPipeline&) = delete;

  const PrefetchConfig& config() const { return config_; }

  // --- Client messages ---------------------------------------------------------
  // Admits and starts staging the next batch. FAILED_PRECONDITION when
  // buffer_size batches are held; INVALID_ARGUMENT when the previous batch
  // is incomplete or the header is malformed; the allocation's and rule's
  // codes otherwise.
  absl::Status OnBatchHeader(const PrefetchBatchHeader& header);
  // Bytes of array `array_index` of the batch being received; commits the
  // batch when its last byte arrived. INVALID_ARGUMENT outside a batch, for
  // a bad index or too many bytes.
  absl::Status OnBatchChunk(int64_t array_index, absl::string_view data);
  // INVALID_ARGUMENT for a sequence never admitted; FAILED_PRECONDITION when
  // not yet delivered or already released.
  absl::Status OnRelease(int64_t sequence);
  // The consumer takes the next batch (see the header comment).
  // FAILED_PRECONDITION when batch n-1 has not been delivered yet.
  absl::Status OnNext();
  // The client half-closed. INVALID_ARGUMENT when a batch is incomplete.
  absl::Status OnInputDone();

  // --- Outputs -------------------------------------------------------------------
  // The next output, if one is due: ready for the next batch in sequence
  // once staged, then (after OnInputDone and every delivery) the stats.
  std::optional<PrefetchOutput> TakeOutput();
  // True once the stats output was taken: the stream may finish OK.
  bool done() const { return stats_taken_; }

  // Deletes every tensor the stream still holds and aborts a batch being
  // received. Idempotent.
  void Close();

  // Current statistics (final once done()).
  PrefetchStats Stats(absl::Time now) const;
  int64_t held() const { return static_cast<int64_t>(staged_.size()) + (receiving_ ? 1 : 0); }

 private:
  struct StagedBatch {
    int64_t device_bytes = 0;
    std::vector<std::string> ids;
    // Until delivered; only ids are kept after that, so the pipeline does not
    // pin tensors the consumer may donate.
    std::vector<std::pair<std::string, std::shared_ptr<const Tensor>>> tensors;
  };

  absl::Status CommitReceiving();
  void Free(StagedBatch& batch);
  void UpdateBlockedClock(absl::Time now);
  static absl::Status InBatch(int64_t sequence, const absl::Status& status);

  const TensorOps* ops_;
  PrefetchConfig config_;
  PrefetchMetrics* metrics_;

  int64_t next_sequence_ = 0;              // batches admitted
  int64_t next_delivery_ = 0;              // the next batch whose ready is due
  int64_t nexts_ = 0;                      // OnNext calls
  std::optional<absl::Time> asked_at_;     // Next waiting for batch next_delivery_
  std::map<int64_t, StagedBatch> staged_;  // committed, not released

  // The batch being received.
  std::unique_ptr<BatchUploadSession> receiving_;
  int64_t receiving_expected_ = 0;
  int64_t receiving_bytes_ = 0;

  bool input_done_ = false;
  bool stats_taken_ = false;
  bool closed_ = false;

  PrefetchStats stats_;
  std::optional<absl::Time> full_since_;  // buffer full while input is open
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PREFETCH_PREFETCH_PIPELINE_H_
