// Metrics: counters and live gauges rendered in the Prometheus text
// exposition format. Counters are incremented by the components that own the
// events; gauges are read at scrape time through collectors, so they are
// never stale.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_METRICS_METRICS_H_
#define PLACEMENT_SERVER_METRICS_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace placement::server {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// One sample a collector reports at scrape time.
struct GaugeSample {
  std::string name;
  MetricLabels labels;
  double value = 0;
};

class Metrics {
 public:
  // Declares a metric's HELP and TYPE ("counter" or "gauge"). Optional but
  // recommended; undeclared metrics render as untyped.
  void Describe(std::string name, std::string type, std::string help);
  void Add(absl::string_view name, const MetricLabels& labels, double delta);
  void Increment(absl::string_view name, const MetricLabels& labels = {}) { Add(name, labels, 1); }
  // `collect` runs at every scrape and appends current gauge values.
  void AddCollector(std::function<void(std::vector<GaugeSample>*)> collect);
  // Value of a counter (0 when never incremented); for tests and status.
  double CounterValue(absl::string_view name, const MetricLabels& labels = {}) const;
  std::string Render() const;

 private:
  struct Description {
    std::string type;
    std::string help;
  };
  mutable absl::Mutex mu_;
  std::map<std::string, Description> descriptions_ ABSL_GUARDED_BY(mu_);
  // name -> rendered labels -> value
  std::map<std::string, std::map<std::string, double>> counters_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(std::vector<GaugeSample>*)>> collectors_ ABSL_GUARDED_BY(mu_);
};

// `{a="x",b="y"}` with Prometheus escaping; empty string for no labels.
std::string RenderLabels(const MetricLabels& labels);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_METRICS_METRICS_H_
