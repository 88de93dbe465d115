#include "server/tensor/tenant_metrics.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

double ValueOf(const std::vector<GaugeSample>& samples, const std::string& name,
               const std::string& tenant) {
  for (const GaugeSample& s : samples) {
    if (s.name == name && s.labels == MetricLabels{{"tenant", tenant}}) return s.value;
  }
  return -1;
}

TEST(TenantMetricsTest, OneSeriesPerTenantAndTheDefaultTenantNamed) {
  std::vector<GaugeSample> samples = TenantSamples({{"", {4096, 1}}, {"team-a", {8192, 2}}});
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(ValueOf(samples, "placementd_tenant_device_bytes", "(default)"), 4096);
  EXPECT_EQ(ValueOf(samples, "placementd_tenant_tensors", "(default)"), 1);
  EXPECT_EQ(ValueOf(samples, "placementd_tenant_device_bytes", "team-a"), 8192);
  EXPECT_EQ(ValueOf(samples, "placementd_tenant_tensors", "team-a"), 2);
}

TEST(TenantMetricsTest, CardinalityIsBoundedByTheLargestTenants) {
  std::vector<std::pair<std::string, TenantUsage>> usages;
  for (int i = 0; i < 100; ++i) usages.push_back({"t" + std::to_string(i), {i * 4096, 1}});
  std::vector<GaugeSample> samples = TenantSamples(usages, 3);
  // Three tenants and "(other)", two gauges each.
  ASSERT_EQ(samples.size(), 8u);
  EXPECT_EQ(ValueOf(samples, "placementd_tenant_device_bytes", "t99"), 99 * 4096);
  EXPECT_EQ(ValueOf(samples, "placementd_tenant_device_bytes", "t97"), 97 * 4096);
  EXPECT_EQ(ValueOf(samples, "placementd_tenant_device_bytes", "t96"), -1);
  // t0..t96 summed.
  EXPECT_EQ(ValueOf(samples, "placementd_tenant_device_bytes", "(other)"), 96 * 97 / 2 * 4096);
  EXPECT_EQ(ValueOf(samples, "placementd_tenant_tensors", "(other)"), 97);
  EXPECT_EQ(TenantSamples(usages).size(), 2 * (kMaxTenantSeries + 1));
}

}  // namespace
}  // namespace placement::server
