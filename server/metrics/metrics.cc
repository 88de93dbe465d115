#include "server/metrics/metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace placement::server {

std::string RenderLabels(const MetricLabels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    std::string value = absl::StrReplaceAll(labels[i].second, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}});
    absl::StrAppend(&out, i ? "," : "", labels[i].first, "=\"", value, "\"");
  }
  out += "}";
  return out;
}

void Metrics::Describe(std::string name, std::string type, std::string help) {
  absl::MutexLock lock(&mu_);
  descriptions_[std::move(name)] = Description{std::move(type), std::move(help)};
}

void Metrics::Add(absl::string_view name, const MetricLabels& labels, double delta) {
  std::string key = RenderLabels(labels);
  absl::MutexLock lock(&mu_);
  counters_[std::string(name)][key] += delta;
}

void Metrics::AddCollector(std::function<void(std::vector<GaugeSample>*)> collect) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collect));
}

double Metrics::CounterValue(absl::string_view name, const MetricLabels& labels) const {
  absl::MutexLock lock(&mu_);
  auto it = counters_.find(std::string(name));
  if (it == counters_.end()) return 0;
  auto jt = it->second.find(RenderLabels(labels));
  return jt == it->second.end() ? 0 : jt->second;
}

std::string Metrics::Render() const {
  std::vector<std::function<void(std::vector<GaugeSample>*)>> collectors;
  std::map<std::string, std::map<std::string, double>> values;
  std::map<std::string, Description> descriptions;
  {
    absl::MutexLock lock(&mu_);
    collectors = collectors_;
    values = counters_;
    descriptions = descriptions_;
  }
  std::vector<GaugeSample> samples;
  for (const auto& collect : collectors) collect(&samples);
  for (const auto& s : samples) values[s.name][RenderLabels(s.labels)] = s.value;
  std::string out;
  for (const auto& [name, series] : values) {
    auto d = descriptions.find(name);
    if (d != descriptions.end()) {
      absl::StrAppend(&out, "# HELP ", name, " ", d->second.help, "\n# TYPE ", name, " ",
                      d->second.type, "\n");
    }
    for (const auto& [labels, value] : series) {
      absl::StrAppend(&out, name, labels, " ", value, "\n");
    }
  }
  return out;
}

}  // namespace placement::server
