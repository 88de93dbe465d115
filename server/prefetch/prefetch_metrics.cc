#include "server/prefetch/prefetch_metrics.h"

#include <string>
#include <vector>

namespace placement::server {
namespace {

std::string ResultLabel(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return "ok";
    case absl::StatusCode::kCancelled:
      return "cancelled";
    default:
      return "error";
  }
}

}  // namespace

PrefetchMetrics::PrefetchMetrics(Metrics* metrics)
    : metrics_(metrics), live_(std::make_shared<Live>()) {
  if (metrics_ == nullptr) return;
  metrics_->Describe("placementd_prefetch_streams_open", "gauge", "Open prefetch streams.");
  metrics_->Describe("placementd_prefetch_batches_held", "gauge",
                     "Prefetch batches admitted and not yet released, over all streams.");
  metrics_->Describe("placementd_prefetch_device_bytes_held", "gauge",
                     "Device bytes of staged, unreleased prefetch batches.");
  metrics_->Describe("placementd_prefetch_streams_total", "counter",
                     "Finished prefetch streams by result (ok, cancelled, error).",
                     {{{"result", "ok"}}, {{"result", "cancelled"}}, {{"result", "error"}}});
  metrics_->Describe("placementd_prefetch_batches_staged_total", "counter",
                     "Prefetch batches staged onto devices.");
  metrics_->Describe("placementd_prefetch_bytes_staged_total", "counter",
                     "Device bytes of staged prefetch batches, replicas included.");
  metrics_->Describe("placementd_prefetch_consumer_stall_seconds_total", "counter",
                     "Time consumers waited for a ready prefetch batch.");
  metrics_->Describe("placementd_prefetch_producer_blocked_seconds_total", "counter",
                     "Time prefetch buffers were full while producers could send.");
  std::shared_ptr<Live> live = live_;
  metrics_->AddCollector([live](std::vector<GaugeSample>* out) {
    out->push_back(
        {"placementd_prefetch_streams_open", {}, static_cast<double>(live->open_streams.load())});
    out->push_back(
        {"placementd_prefetch_batches_held", {}, static_cast<double>(live->batches_held.load())});
    out->push_back({"placementd_prefetch_device_bytes_held",
                    {},
                    static_cast<double>(live->bytes_held.load())});
  });
}

void PrefetchMetrics::StreamOpened() { live_->open_streams.fetch_add(1); }

void PrefetchMetrics::StreamClosed(absl::StatusCode code) {
  live_->open_streams.fetch_sub(1);
  if (metrics_ != nullptr) {
    metrics_->Increment("placementd_prefetch_streams_total", {{"result", ResultLabel(code)}});
  }
}

void PrefetchMetrics::BatchAdmitted() { live_->batches_held.fetch_add(1); }

void PrefetchMetrics::BatchStaged(int64_t device_bytes) {
  live_->bytes_held.fetch_add(device_bytes);
  if (metrics_ == nullptr) return;
  metrics_->Increment("placementd_prefetch_batches_staged_total");
  metrics_->Add("placementd_prefetch_bytes_staged_total", {}, static_cast<double>(device_bytes));
}

void PrefetchMetrics::BatchFreed(int64_t device_bytes) {
  live_->batches_held.fetch_sub(1);
  live_->bytes_held.fetch_sub(device_bytes);
}

void PrefetchMetrics::ConsumerStall(absl::Duration d) {
  if (metrics_ != nullptr && d > absl::ZeroDuration()) {
    metrics_->Add("placementd_prefetch_consumer_stall_seconds_total", {}, absl::ToDoubleSeconds(d));
  }
}

void PrefetchMetrics::ProducerBlocked(absl::Duration d) {
  if (metrics_ != nullptr && d > absl::ZeroDuration()) {
    metrics_->Add("placementd_prefetch_producer_blocked_seconds_total", {},
                  absl::ToDoubleSeconds(d));
  }
}

}  // namespace placement::server
