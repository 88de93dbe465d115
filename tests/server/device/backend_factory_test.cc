#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/platform/cpu/cpu_options.h"
#include "server/platform/platform_selection.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

// These run on machines without a GPU (CI); on a GPU machine the auto case
// picks CUDA and the cuda case succeeds, which the gpu-labelled tests cover.
bool GpuPresent() {
  BackendOptions options;
  options.kind = "cuda";
  return CreateBackend(options).ok();
}

TEST(BackendFactoryTest, CpuIsAlwaysAvailable) {
  BackendOptions options;
  options.kind = "cpu";
  options.platforms.Mutable<CpuPlatformOptions>().num_devices = 3;
  options.platforms.Mutable<CpuPlatformOptions>().device_memory_bytes = 4096;
  auto selection = CreateBackend(options);
  ASSERT_TRUE(selection.ok()) << selection.status();
  EXPECT_EQ(selection->backend->Name(), "cpu");
  EXPECT_EQ(selection->backend->Devices().size(), 3u);
  EXPECT_THAT(selection->note, HasSubstr("3 CPU virtual devices"));
}

TEST(BackendFactoryTest, AutoFallsBackToCpuWithAReason) {
  if (GpuPresent()) GTEST_SKIP() << "a GPU is present";
  BackendOptions options;
  options.kind = "auto";
  auto selection = CreateBackend(options);
  ASSERT_TRUE(selection.ok()) << selection.status();
  EXPECT_EQ(selection->backend->Name(), "cpu");
  EXPECT_THAT(selection->note, HasSubstr("falling back to 8 CPU virtual devices"));
}

TEST(BackendFactoryTest, CudaWithoutGpuFailsClearly) {
  if (GpuPresent()) GTEST_SKIP() << "a GPU is present";
  BackendOptions options;
  options.kind = "cuda";
  auto selection = CreateBackend(options);
  EXPECT_EQ(selection.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(selection.status().message()), HasSubstr("--backend=cuda but no GPU"));
}

TEST(BackendFactoryTest, UnknownKind) {
  BackendOptions options;
  options.kind = "tpu";
  EXPECT_EQ(CreateBackend(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace placement::server
