#include "server/metrics/metrics.h"

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

}  // namespace

// The gauges collectors report, as a prometheus Collectable.
class Metrics::CollectedGauges final : public prometheus::Collectable {
 public:
  void Describe(std::string name, std::string help) {
    absl::MutexLock lock(&mu_);
    help_[std::move(name)] = std::move(help);
  }
  void AddCollector(std::function<void(std::vector<GaugeSample>*)> collect) {
    absl::MutexLock lock(&mu_);
    collectors_.push_back(std::move(collect));
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<std::function<void(std::vector<GaugeSample>*)>> collectors;
    std::map<std::string, std::string> help;
    {
      absl::MutexLock lock(&mu_);
      collectors = collectors_;
      help = help_;
    }
    std::vector<GaugeSample> samples;
    for (const auto& collect : collectors) collect(&samples);
    // name -> labels -> value: a later sample of the same series wins.
    std::map<std::string, std::map<prometheus::Labels, double>> series;
    for (const GaugeSample& s : samples) series[s.name][ToLabels(s.labels)] = s.value;
    std::vector<prometheus::MetricFamily> families;
    for (const auto& [name, values] : series) {
      prometheus::MetricFamily family;
      family.name = name;
      auto h = help.find(name);
      if (h != help.end()) family.help = h->second;
      family.type = prometheus::MetricType::Gauge;
      for (const auto& [labels, value] : values) {
        prometheus::ClientMetric metric;
        for (const auto& [k, v] : labels) metric.label.push_back({k, v});
        metric.gauge.value = value;
        family.metric.push_back(std::move(metric));
      }
      families.push_back(std::move(family));
    }
    return families;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> help_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(std::vector<GaugeSample>*)>> collectors_ ABSL_GUARDED_BY(mu_);
};

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      gauges_(std::make_shared<CollectedGauges>()) {}

Metrics::~Metrics() = default;

void Metrics::Describe(std::string name, std::string type, std::string help) {
  if (type == "gauge") {
    gauges_->Describe(std::move(name), std::move(help));
    return;
  }
  absl::MutexLock lock(&mu_);
  counter_help_[name] = std::move(help);
  CounterFamily(name);
}

void Metrics::DescribeHistogram(std::string name, std::string help, std::vector<double> buckets) {
  absl::MutexLock lock(&mu_);
  if (histograms_.count(name)) return;
  auto& family = prometheus::BuildHistogram().Name(name).Help(std::move(help)).Register(*registry_);
  histograms_.emplace(std::move(name), HistogramFamily{&family, std::move(buckets)});
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

void Metrics::Add(absl::string_view name, const MetricLabels& labels, double delta) {
  prometheus::Family<prometheus::Counter>* family;
  {
    absl::MutexLock lock(&mu_);
    family = CounterFamily(name);
  }
  // Families live as long as the registry; Family::Add is thread-safe.
  family->Add(ToLabels(labels)).Increment(delta);
}

void Metrics::Observe(absl::string_view name, const MetricLabels& labels, double value) {
  HistogramFamily histogram;
  {
    absl::MutexLock lock(&mu_);
    auto it = histograms_.find(name);
    if (it == histograms_.end()) return;
    histogram = it->second;
  }
  histogram.family->Add(ToLabels(labels), histogram.buckets).Observe(value);
}

void Metrics::AddCollector(std::function<void(std::vector<GaugeSample>*)> collect) {
  gauges_->AddCollector(std::move(collect));
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
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (auto& f : gauges_->Collect()) families.push_back(std::move(f));
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

std::vector<std::weak_ptr<prometheus::Collectable>> Metrics::Collectables() const {
  return {registry_, gauges_};
}

}  // namespace placement::server
