#include "server/metrics/metrics.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace placement::server {
namespace {

prometheus::Labels ToLabels(const MetricLabels& labels) {
  return prometheus::Labels(labels.begin(), labels.end());
}

// A series' labels as (name, value) pairs, for ordering.
std::vector<std::pair<std::string, std::string>> LabelKey(const prometheus::ClientMetric& m) {
  std::vector<std::pair<std::string, std::string>> key;
  key.reserve(m.label.size());
  for (const prometheus::ClientMetric::Label& l : m.label) key.emplace_back(l.name, l.value);
  return key;
}

}  // namespace

// Every family of one Metrics, as one prometheus Collectable: the registry's
// counters and histograms, the samples collectors report (typed by their
// declaration), and a zero series for each declared family that has none.
class Metrics::Exposition final : public prometheus::Collectable {
 public:
  explicit Exposition(std::shared_ptr<prometheus::Registry> registry)
      : registry_(std::move(registry)) {}

  void Describe(std::string name, prometheus::MetricType type, std::string help,
                std::vector<double> buckets = {}) {
    absl::MutexLock lock(&mu_);
    declared_[std::move(name)] = Declared{type, std::move(help), std::move(buckets)};
  }
  void AddCollector(std::function<void(std::vector<GaugeSample>*)> collect) {
    absl::MutexLock lock(&mu_);
    collectors_.push_back(std::move(collect));
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<std::function<void(std::vector<GaugeSample>*)>> collectors;
    std::map<std::string, Declared> declared;
    {
      absl::MutexLock lock(&mu_);
      collectors = collectors_;
      declared = declared_;
    }
    std::map<std::string, prometheus::MetricFamily> families;
    for (prometheus::MetricFamily& f : registry_->Collect()) {
      prometheus::MetricFamily& into = families[f.name];
      if (into.name.empty()) {
        into = std::move(f);
      } else {
        for (auto& m : f.metric) into.metric.push_back(std::move(m));
      }
    }
    std::vector<GaugeSample> samples;
    for (const auto& collect : collectors) collect(&samples);
    // name -> labels -> value: a later sample of the same series wins.
    std::map<std::string, std::map<prometheus::Labels, double>> series;
    for (const GaugeSample& s : samples) series[s.name][ToLabels(s.labels)] = s.value;
    for (const auto& [name, values] : series) {
      prometheus::MetricFamily& family = families[name];
      if (family.name.empty()) {
        family.name = name;
        auto d = declared.find(name);
        family.type = d != declared.end() && d->second.type == prometheus::MetricType::Counter
                          ? prometheus::MetricType::Counter
                          : prometheus::MetricType::Gauge;
      }
      for (const auto& [labels, value] : values) {
        prometheus::ClientMetric metric;
        for (const auto& [k, v] : labels) metric.label.push_back({k, v});
        if (family.type == prometheus::MetricType::Counter) {
          metric.counter.value = value;
        } else {
          metric.gauge.value = value;
        }
        family.metric.push_back(std::move(metric));
      }
    }
    for (const auto& [name, d] : declared) {
      prometheus::MetricFamily& family = families[name];
      if (family.name.empty()) {
        family.name = name;
        family.type = d.type;
      }
      if (family.help.empty()) family.help = d.help;
      if (family.metric.empty()) family.metric.push_back(ZeroMetric(d));
    }
    std::vector<prometheus::MetricFamily> out;
    out.reserve(families.size());
    for (auto& [name, family] : families) {
      // The registry's series come in hash order: sorted, the exposition
      // reads the same from one scrape to the next.
      std::stable_sort(family.metric.begin(), family.metric.end(),
                       [](const prometheus::ClientMetric& a, const prometheus::ClientMetric& b) {
                         return LabelKey(a) < LabelKey(b);
                       });
      out.push_back(std::move(family));
    }
    return out;
  }

 private:
  struct Declared {
    prometheus::MetricType type = prometheus::MetricType::Gauge;
    std::string help;
    std::vector<double> buckets;  // histograms
  };

  // The unlabelled series of a family that has none yet.
  static prometheus::ClientMetric ZeroMetric(const Declared& d) {
    prometheus::ClientMetric metric;
    if (d.type == prometheus::MetricType::Histogram) {
      for (double bound : d.buckets) metric.histogram.bucket.push_back({0, bound});
      metric.histogram.bucket.push_back({0, std::numeric_limits<double>::infinity()});
    }
    return metric;
  }

  const std::shared_ptr<prometheus::Registry> registry_;
  mutable absl::Mutex mu_;
  std::map<std::string, Declared> declared_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(std::vector<GaugeSample>*)>> collectors_ ABSL_GUARDED_BY(mu_);
};

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      exposition_(std::make_shared<Exposition>(registry_)) {}

Metrics::~Metrics() = default;

void Metrics::Describe(std::string name, std::string type, std::string help,
                       const std::vector<MetricLabels>& zero_series) {
  const bool counter = type == "counter";
  exposition_->Describe(
      name, counter ? prometheus::MetricType::Counter : prometheus::MetricType::Gauge, help);
  if (!counter) return;
  absl::MutexLock lock(&mu_);
  counter_help_[name] = std::move(help);
  if (zero_series.empty()) return;
  prometheus::Family<prometheus::Counter>* family = CounterFamily(name);
  for (const MetricLabels& labels : zero_series) family->Add(ToLabels(labels));
}

void Metrics::DescribeHistogram(std::string name, std::string help, std::vector<double> buckets) {
  absl::MutexLock lock(&mu_);
  if (histograms_.count(name)) return;
  exposition_->Describe(name, prometheus::MetricType::Histogram, help, buckets);
  auto& family = prometheus::BuildHistogram().Name(name).Help(std::move(help)).Register(*registry_);
  histograms_.emplace(std::move(name), HistogramFamily{&family, std::move(buckets)});
}

void Metrics::InitHistogram(absl::string_view name, const MetricLabels& labels) {
  HistogramFamily histogram;
  {
    absl::MutexLock lock(&mu_);
    auto it = histograms_.find(name);
    if (it == histograms_.end()) return;
    histogram = it->second;
  }
  histogram.family->Add(ToLabels(labels), histogram.buckets);
}

prometheus::Family<prometheus::Counter>* Metrics::CounterFamily(absl::string_view name) {
  auto it = counters_.find(name);
  if (it != counters_.end()) return it->second;
  auto help = counter_help_.find(name);
  auto& family = prometheus::BuildCounter()
                     .Name(std::string(name))
                     .Help(help == counter_help_.end() ? "" : help->second)
                     .Register(*registry_);
  counters_.emplace(std::string(name), &family);
  return &family;
}

void CounterSeries::Add(double delta) const {
  if (counter_ != nullptr) counter_->Increment(delta);
}

void HistogramSeries::Observe(double value) const {
  if (histogram_ != nullptr) histogram_->Observe(value);
}

CounterSeries Metrics::Counter(absl::string_view name, const MetricLabels& labels) {
  prometheus::Family<prometheus::Counter>* family;
  {
    absl::MutexLock lock(&mu_);
    family = CounterFamily(name);
  }
  // Families and their series live as long as the registry (series are
  // never removed); Family::Add is thread-safe.
  return CounterSeries(&family->Add(ToLabels(labels)));
}

HistogramSeries Metrics::Histogram(absl::string_view name, const MetricLabels& labels) {
  HistogramFamily histogram;
  {
    absl::MutexLock lock(&mu_);
    auto it = histograms_.find(name);
    if (it == histograms_.end()) return HistogramSeries();
    histogram = it->second;
  }
  return HistogramSeries(&histogram.family->Add(ToLabels(labels), histogram.buckets));
}

void Metrics::Add(absl::string_view name, const MetricLabels& labels, double delta) {
  Counter(name, labels).Add(delta);
}

void Metrics::Observe(absl::string_view name, const MetricLabels& labels, double value) {
  Histogram(name, labels).Observe(value);
}

void Metrics::AddCollector(std::function<void(std::vector<GaugeSample>*)> collect) {
  exposition_->AddCollector(std::move(collect));
}

double Metrics::CounterValue(absl::string_view name, const MetricLabels& labels) const {
  prometheus::Family<prometheus::Counter>* family = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = counters_.find(name);
    if (it == counters_.end()) return 0;
    family = it->second;
  }
  const prometheus::Labels key = ToLabels(labels);
  return family->Has(key) ? family->Add(key).Value() : 0;
}

HistogramSnapshot Metrics::HistogramValue(absl::string_view name,
                                          const MetricLabels& labels) const {
  HistogramFamily histogram;
  {
    absl::MutexLock lock(&mu_);
    auto it = histograms_.find(name);
    if (it == histograms_.end()) return {};
    histogram = it->second;
  }
  const prometheus::Labels key = ToLabels(labels);
  if (!histogram.family->Has(key)) return {};
  prometheus::ClientMetric m = histogram.family->Add(key, histogram.buckets).Collect();
  return {m.histogram.sample_count, m.histogram.sample_sum};
}

std::string Metrics::Render() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, exposition_->Collect());
  return out.str();
}

std::vector<std::weak_ptr<prometheus::Collectable>> Metrics::Collectables() const {
  return {exposition_};
}

}  // namespace placement::server
