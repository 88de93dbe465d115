// Per-tenant gauges of what the tensor store holds:
//   placementd_tenant_device_bytes{tenant}  device bytes, page-rounded as quotas count them
//   placementd_tenant_tensors{tenant}       tensors
// The implicit tenant of a daemon without authentication is "(default)".
// Cardinality is bounded: the kMaxTenantSeries tenants holding the most
// device bytes get a series each, and the rest are summed under
// tenant="(other)"; a tenant that holds nothing has no series.
//
// Thread-safe (the store is).
#ifndef PLACEMENT_SERVER_TENSOR_TENANT_METRICS_H_
#define PLACEMENT_SERVER_TENSOR_TENANT_METRICS_H_

#include <string>
#include <utility>
#include <vector>

#include "server/metrics/metrics.h"
#include "server/tensor/tenant_quota.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

inline constexpr size_t kMaxTenantSeries = 32;

// The series for `usages`: at most `max_series` tenants by device bytes
// (ties by name), then "(other)" for the rest.
std::vector<GaugeSample> TenantSamples(std::vector<std::pair<std::string, TenantUsage>> usages,
                                       size_t max_series = kMaxTenantSeries);

// Declares the gauges and adds their collector. REQUIRES: `store` outlives
// the metrics endpoint.
void AddTenantMetrics(Metrics* metrics, const TensorStore* store);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_TENANT_METRICS_H_
