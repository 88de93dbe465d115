// TotalMemoryInUse: the bytes in use over every device the client sees (the
// sum of ListDevices' memory_in_use_bytes), for tests that check a daemon
// returns to its baseline; a failed call is a test failure and counts 0.
#ifndef PLACEMENT_TESTS_TESTING_DEVICE_MEMORY_H_
#define PLACEMENT_TESTS_TESTING_DEVICE_MEMORY_H_

#include <cstdint>

#include "gtest/gtest.h"
#include "placement/client/client.h"

namespace placement::testing {

inline int64_t TotalMemoryInUse(const client::Client& client) {
  auto devices = client.ListDevices();
  EXPECT_TRUE(devices.ok()) << devices.status();
  int64_t total = 0;
  if (devices.ok()) {
    for (const auto& d : *devices) total += d.memory_in_use_bytes;
  }
  return total;
}

}  // namespace placement::testing

#endif  // PLACEMENT_TESTS_TESTING_DEVICE_MEMORY_H_
