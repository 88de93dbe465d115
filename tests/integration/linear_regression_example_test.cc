// Runs examples/linear_regression against a real placementd with 8 CPU
// virtual devices and checks that training through the daemon's all-reduce
// reaches the known solution, with both gradient layouts.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_process.h"

namespace placement::testing {
namespace {

using ::testing::HasSubstr;

// The example is built next to placementd (CMAKE_RUNTIME_OUTPUT_DIRECTORY).
std::string ExampleBinary() {
  const std::string daemon = PlacementdBinary();
  return daemon.substr(0, daemon.rfind('/') + 1) + "linear_regression";
}

class LinearRegressionExampleTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LinearRegressionExampleTest, ConvergesToTheKnownSolution) {
  DaemonOptions options;
  options.extra_flags = {"--backend=cpu", "--cpu_devices=8"};
  auto daemon = DaemonProcess::Start(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  CommandResult run = RunCommand({ExampleBinary(), "--target=" + (*daemon)->address(),
                                  "--layout=" + GetParam(), "--tolerance=1e-3"},
                                 absl::Seconds(300));
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("converged: w = [2.0"));

  // Everything the example created is gone: no tensors, no device memory.
  auto client = (*daemon)->Connect();
  ASSERT_TRUE(client.ok());
  auto devices = (*client)->ListDevices();
  ASSERT_TRUE(devices.ok());
  for (const auto& d : *devices) EXPECT_EQ(d.memory_in_use_bytes, 0) << "device " << d.id;
}

INSTANTIATE_TEST_SUITE_P(Layouts, LinearRegressionExampleTest,
                         ::testing::Values("partial", "blocks"));

}  // namespace
}  // namespace placement::testing
