// Metrics: the daemon's Prometheus metrics, kept in a prometheus-cpp registry.
// Counters and histograms are updated by the components that own the events;
// gauges (and counters a component keeps itself) are read at scrape time
// through collectors, so they are never stale. Values are doubles, rendered
// exactly for integers up to 2^53 (bytes, counts).
//
// Conventions (docs/operations.md "Metrics"; tests/ops/metrics_test.py checks
// the exposition with `promtool check metrics`):
//   - counter names end in "_total", gauge names never do;
//   - every declared family is in the exposition from the start: a declared
//     counter or histogram with no series yet, or a declared gauge no
//     collector reports, shows one unlabelled series at zero, and Describe
//     can create the label sets a counter will use at zero up front;
//   - label values come from bounded sets (methods, codes, devices, a capped
//     number of tenants), never from request data.
//
// Names follow Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*); an invalid name
// or label is a programming error (prometheus-cpp throws).
//
// Thread-safe. Collectors run on the scraping thread, without any lock of
// this class held; they must be thread-safe themselves.
#ifndef PLACEMENT_SERVER_METRICS_METRICS_H_
#define PLACEMENT_SERVER_METRICS_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace prometheus {
class Collectable;
class Counter;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace placement::server {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// One sample a collector reports at scrape time.
struct GaugeSample {
  std::string name;
  MetricLabels labels;
  double value = 0;
};

// One counter series looked up once, for hot paths: Add takes no lock of
// Metrics and looks no label up. Valid while its Metrics lives; a
// default-constructed one ignores Add.
class CounterSeries {
 public:
  CounterSeries() = default;
  void Add(double delta) const;

 private:
  friend class Metrics;
  explicit CounterSeries(prometheus::Counter* counter) : counter_(counter) {}
  prometheus::Counter* counter_ = nullptr;
};

// One histogram series looked up once (see CounterSeries). Observe is
// ignored for a histogram that was never declared.
class HistogramSeries {
 public:
  HistogramSeries() = default;
  void Observe(double value) const;

 private:
  friend class Metrics;
  explicit HistogramSeries(prometheus::Histogram* histogram) : histogram_(histogram) {}
  prometheus::Histogram* histogram_ = nullptr;
};

// Count and sum of one histogram series.
struct HistogramSnapshot {
  uint64_t count = 0;
  double sum = 0;
};

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Declares a metric's HELP and TYPE: "counter" (updated with Add, or
  // reported by a collector that keeps its own running total) or "gauge"
  // (reported by collectors). A counter's `zero_series` are created at zero
  // now, so that a rate() over one of them works before its first event.
  // Optional for counters updated with Add (an undeclared one gets an empty
  // HELP and appears with its first event); an undeclared collected sample
  // is a gauge.
  void Describe(std::string name, std::string type, std::string help,
                const std::vector<MetricLabels>& zero_series = {});
  // Declares a histogram and its bucket upper bounds (sorted, +Inf implied).
  // REQUIRES: before the first Observe of `name`.
  void DescribeHistogram(std::string name, std::string help, std::vector<double> buckets);
  // Creates the series `labels` of a declared histogram at zero (ignored
  // for an undeclared one).
  void InitHistogram(absl::string_view name, const MetricLabels& labels);

  void Add(absl::string_view name, const MetricLabels& labels, double delta);
  void Increment(absl::string_view name, const MetricLabels& labels = {}) { Add(name, labels, 1); }
  // REQUIRES: `name` was declared with DescribeHistogram (else ignored).
  void Observe(absl::string_view name, const MetricLabels& labels, double value);
  // The series `labels` of counter `name` (created at zero) or of declared
  // histogram `name`, for callers that update it often.
  CounterSeries Counter(absl::string_view name, const MetricLabels& labels);
  HistogramSeries Histogram(absl::string_view name, const MetricLabels& labels);
  // `collect` runs at every scrape and appends current gauge values.
  void AddCollector(std::function<void(std::vector<GaugeSample>*)> collect);

  // For tests and status: a counter's value (0 when never incremented) and a
  // histogram series' count and sum (zero when never observed).
  double CounterValue(absl::string_view name, const MetricLabels& labels = {}) const;
  HistogramSnapshot HistogramValue(absl::string_view name, const MetricLabels& labels = {}) const;

  // The Prometheus text exposition (format 0.0.4) of everything, families
  // sorted by name and each family's series by their labels.
  std::string Render() const;
  // What an exposer serves (one Collectable with every family). The pointers
  // stay valid while this object lives.
  std::vector<std::weak_ptr<prometheus::Collectable>> Collectables() const;

 private:
  class Exposition;
  struct HistogramFamily {
    prometheus::Family<prometheus::Histogram>* family;
    std::vector<double> buckets;
  };
  prometheus::Family<prometheus::Counter>* CounterFamily(absl::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<Exposition> exposition_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::string, std::less<>> counter_help_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, prometheus::Family<prometheus::Counter>*, std::less<>> counters_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, HistogramFamily, std::less<>> histograms_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_METRICS_METRICS_H_
