// Prefetch statistics: the per-stream figures sent at the end of a stream
// (PrefetchStats) and the daemon-wide metrics every pipeline feeds
// (PrefetchMetrics), rendered by the Prometheus endpoint:
//
//   placementd_prefetch_streams_open                   gauge
//   placementd_prefetch_batches_held                   gauge  (admitted, not released)
//   placementd_prefetch_device_bytes_held              gauge  (staged, not released)
//   placementd_prefetch_streams_total{result}          counter (ok, cancelled, error)
//   placementd_prefetch_batches_staged_total           counter
//   placementd_prefetch_bytes_staged_total             counter (device bytes, replicas included)
//   placementd_prefetch_consumer_stall_seconds_total   counter
//   placementd_prefetch_producer_blocked_seconds_total counter
//
// PrefetchMetrics is thread-safe; PrefetchStats is a value.
#ifndef PLACEMENT_SERVER_PREFETCH_PREFETCH_METRICS_H_
#define PLACEMENT_SERVER_PREFETCH_PREFETCH_METRICS_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/metrics/metrics.h"

namespace placement::server {

// One stream's figures.
struct PrefetchStats {
  int64_t batches_staged = 0;  // committed onto devices
  int64_t bytes_staged = 0;    // device bytes of those batches, replicas included
  // Sum over batches of the time from the consumer's Next for batch n to
  // batch n's ready being handed to the transport (0 when it was ready
  // first).
  absl::Duration consumer_stall;
  // Time the buffer was full (buffer_size batches held) while the client
  // could still send: the daemon would admit no new batch then.
  absl::Duration producer_blocked;
  int64_t max_batches_held = 0;
};

class PrefetchMetrics {
 public:
  // `metrics` may be null (unit tests): then only the live counts are kept.
  // REQUIRES: metrics outlives this object's events; the scrape-time gauges
  // stay valid after this object is destroyed.
  explicit PrefetchMetrics(Metrics* metrics);

  void StreamOpened();
  // `code`: the stream's final status code.
  void StreamClosed(absl::StatusCode code);
  void BatchAdmitted();
  void BatchStaged(int64_t device_bytes);
  // A batch left the pipeline (released, freed at the end, or aborted
  // while being received); `device_bytes` 0 for an uncommitted one.
  void BatchFreed(int64_t device_bytes);
  void ConsumerStall(absl::Duration d);
  void ProducerBlocked(absl::Duration d);

  int64_t open_streams() const { return live_->open_streams.load(); }
  int64_t batches_held() const { return live_->batches_held.load(); }
  int64_t device_bytes_held() const { return live_->bytes_held.load(); }

 private:
  struct Live {
    std::atomic<int64_t> open_streams{0};
    std::atomic<int64_t> batches_held{0};
    std::atomic<int64_t> bytes_held{0};
  };
  Metrics* metrics_;
  std::shared_ptr<Live> live_;  // shared with the scrape-time collector
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PREFETCH_PREFETCH_METRICS_H_
