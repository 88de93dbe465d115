#include "server/daemon_metrics.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/metrics/standard_metrics.h"

namespace placement::server {

void AddDaemonGauges(Metrics* metrics, const DeviceInventory* inventory, const CallGate* gate,
                     const StreamRegistry* streams) {
  metrics->AddCollector([inventory, gate, streams](std::vector<GaugeSample>* out) {
    for (const DeviceState& d : inventory->List()) {
      MetricLabels labels = {{"device", absl::StrCat(d.description.id)},
                             {"platform", d.description.platform}};
      out->push_back({"placementd_device_memory_in_use_bytes", labels,
                      static_cast<double>(d.memory_in_use_bytes)});
      out->push_back({"placementd_device_memory_cached_bytes", labels,
                      static_cast<double>(d.memory_cached_bytes)});
      out->push_back({"placementd_device_memory_charged_bytes", labels,
                      static_cast<double>(d.memory_charged_bytes)});
      out->push_back({"placementd_device_memory_limit_bytes", labels,
                      static_cast<double>(d.description.memory_limit_bytes)});
    }
    out->push_back({"placementd_inflight_calls", {}, static_cast<double>(gate->in_flight())});
    out->push_back({"placementd_up", {}, gate->draining() ? 0.0 : 1.0});
    out->push_back({"placementd_open_streams", {}, static_cast<double>(streams->open_streams())});
    out->push_back(
        {"placementd_streams_reaped_total", {}, static_cast<double>(streams->reaped_total())});
  });
  metrics->Describe("placementd_open_streams", "gauge",
                    "Upload, download and prefetch streams open now (--max_streams).");
  metrics->Describe("placementd_streams_reaped_total", "counter",
                    "Streams cancelled since start for making no progress "
                    "(--stream_idle_timeout).");
  metrics->Describe("placementd_device_memory_in_use_bytes", "gauge",
                    "Bytes the daemon holds on each device.");
  metrics->Describe("placementd_device_memory_cached_bytes", "gauge",
                    "Freed bytes kept for reuse on each device (within its budget).");
  metrics->Describe("placementd_device_memory_charged_bytes", "gauge",
                    "What the buffers in use cost each device's budget: blocks plus, on CPU, the "
                    "per-buffer host overhead.");
  metrics->Describe("placementd_device_memory_limit_bytes", "gauge", "Byte budget of each device.");
  metrics->Describe("placementd_inflight_calls", "gauge", "RPCs currently running.");
  metrics->Describe("placementd_up", "gauge", "1 while serving, 0 while draining.");
  AddStandardMetrics(metrics);
}

}  // namespace placement::server
