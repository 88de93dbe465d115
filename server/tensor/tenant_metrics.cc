#include "server/tensor/tenant_metrics.h"

#include <algorithm>

namespace placement::server {
namespace {

constexpr char kBytes[] = "placementd_tenant_device_bytes";
constexpr char kTensors[] = "placementd_tenant_tensors";

void Push(const std::string& tenant, const TenantUsage& usage, std::vector<GaugeSample>* out) {
  MetricLabels labels = {{"tenant", tenant.empty() ? "(default)" : tenant}};
  out->push_back({kBytes, labels, static_cast<double>(usage.device_bytes)});
  out->push_back({kTensors, std::move(labels), static_cast<double>(usage.tensors)});
}

}  // namespace

std::vector<GaugeSample> TenantSamples(std::vector<std::pair<std::string, TenantUsage>> usages,
                                       size_t max_series) {
  std::sort(usages.begin(), usages.end(), [](const auto& a, const auto& b) {
    return a.second.device_bytes != b.second.device_bytes
               ? a.second.device_bytes > b.second.device_bytes
               : a.first < b.first;
  });
  std::vector<GaugeSample> out;
  TenantUsage other;
  for (size_t i = 0; i < usages.size(); ++i) {
    if (i < max_series) {
      Push(usages[i].first, usages[i].second, &out);
    } else {
      other.device_bytes += usages[i].second.device_bytes;
      other.tensors += usages[i].second.tensors;
    }
  }
  if (usages.size() > max_series) Push("(other)", other, &out);
  return out;
}

void AddTenantMetrics(Metrics* metrics, const TensorStore* store) {
  metrics->Describe(kBytes, "gauge",
                    "Device bytes held by each tenant's tensors (page-rounded, as quotas count "
                    "them); the largest tenants, the rest summed as tenant=\"(other)\".");
  metrics->Describe(kTensors, "gauge", "Tensors held by each tenant (same tenants).");
  metrics->AddCollector([store](std::vector<GaugeSample>* out) {
    for (GaugeSample& s : TenantSamples(store->TenantUsages())) out->push_back(std::move(s));
  });
}

}  // namespace placement::server
