// Shared pieces of the platform conformance suite (tests/conformance/): the
// platforms to run it for, and one small PlatformConfig every platform can
// serve. Every registered platform runs the same tests; a platform that is
// not usable on this machine (no GPU, no driver, not built) skips them.
#ifndef PLACEMENT_TESTS_CONFORMANCE_CONFORMANCE_UTIL_H_
#define PLACEMENT_TESTS_CONFORMANCE_CONFORMANCE_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "server/platform/platform.h"
#include "server/platform/platform_registry.h"
#include "server/platform/platform_selection.h"

namespace placement::server::conformance {

// Budget of every device in the suite's config.
inline constexpr int64_t kDeviceBudget = int64_t{32} << 20;
// Devices the suite asks for (per GPU for platforms that split GPUs).
inline constexpr int kDevices = 4;

// What the suite asks of every platform (Platform::RequestDevices).
inline DeviceRequest ConformanceRequest() {
  return DeviceRequest{kDevices, kDeviceBudget, kDeviceBudget / 2};
}

// Small budgets and a cache smaller than the budget, for every platform.
inline PlatformConfig ConformanceConfig() {
  PlatformConfig config;
  RequestDevicesEverywhere(ConformanceRequest(), &config.options);
  config.local_collectives.num_threads = 2;
  return config;
}

// Every registered platform, by name (the test parameter).
inline std::vector<std::string> RegisteredPlatforms() { return PlatformRegistry::Global().Names(); }

// gtest parameter names: the platform's name.
inline std::string PlatformName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace placement::server::conformance

#endif  // PLACEMENT_TESTS_CONFORMANCE_CONFORMANCE_UTIL_H_
