// The PlatformRegistry and --backend selection with the real cpu and cuda
// platforms plus test platforms registered in this binary only: priority
// order, duplicate names, auto falling back past an unusable platform (and
// saying why), bad settings stopping auto, explicit names, unknown names.
#include "server/platform/platform_selection.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/platform/cpu/cpu_backend.h"
#include "server/platform/cpu/cpu_options.h"
#include "server/platform/platform_registry.h"

namespace placement::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A platform whose CreateBackend answers with `status`, or, when OK, with
// `devices` CPU virtual devices (a real CpuBackend under another name).
class TestPlatform final : public Platform {
 public:
  TestPlatform(std::string name, int priority, absl::Status status)
      : name_(std::move(name)), priority_(priority), status_(std::move(status)) {}

  absl::string_view name() const override { return name_; }
  absl::string_view device_noun() const override { return "TPU"; }
  int auto_priority() const override { return priority_; }
  std::string BuildNote() const override { return name_; }
  std::string cross_process_transport() const override { return "gloo"; }
  absl::StatusOr<std::unique_ptr<DeviceBackend>> CreateBackend(
      const PlatformConfig& config) const override {
    if (!status_.ok()) return status_;
    CpuBackendOptions options;
    options.num_devices = 2;
    options.device_memory_bytes = 1 << 20;
    options.process_index = config.process_index;
    auto backend = CpuBackend::Create(options);
    if (!backend.ok()) return backend.status();
    return std::unique_ptr<DeviceBackend>(std::move(*backend));
  }
  absl::StatusOr<std::unique_ptr<CollectiveEngine>> CreateEngine(
      DeviceBackend*, const PlatformConfig&) const override {
    return absl::UnimplementedError("no engine");
  }
  std::string DescribeDevices(const DeviceBackend& backend, const PlatformConfig&) const override {
    return absl::StrCat(backend.Devices().size(), " test devices");
  }

 private:
  std::string name_;
  int priority_;
  absl::Status status_;
};

bool GpuUsable() {
  BackendOptions options;
  options.kind = "cuda";
  return CreateBackend(options).ok();
}

TEST(PlatformRegistryTest, CpuAndCudaRegisterThemselvesCudaFirst) {
  const PlatformRegistry& registry = PlatformRegistry::Global();
  ASSERT_NE(registry.Find("cpu"), nullptr);
  ASSERT_NE(registry.Find("cuda"), nullptr);
  EXPECT_EQ(registry.Find("tpu"), nullptr);
  std::vector<std::string> names = registry.Names();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names.back(), "cpu");  // the always-usable last resort
  EXPECT_LT(std::find(names.begin(), names.end(), "cuda") - names.begin(),
            std::find(names.begin(), names.end(), "cpu") - names.begin());
  EXPECT_EQ(registry.Find("cpu")->device_noun(), "CPU");
  EXPECT_EQ(registry.Find("cuda")->device_noun(), "GPU");
}

TEST(PlatformRegistryTest, ANameIsRegisteredOnce) {
  EXPECT_FALSE(PlatformRegistry::Global().Register(
      std::make_unique<TestPlatform>("cpu", 1000, absl::OkStatus())));
  EXPECT_EQ(PlatformRegistry::Global().Find("cpu")->auto_priority(), 0);
}

TEST(PlatformSelectionTest, ExplicitNamesAndUnknownNames) {
  BackendOptions options;
  options.kind = "cpu";
  options.platforms.Mutable<CpuPlatformOptions>().num_devices = 3;
  options.platforms.Mutable<CpuPlatformOptions>().device_memory_bytes = 4096;
  auto cpu = CreateBackend(options, /*process_index=*/2);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->platform->name(), "cpu");
  EXPECT_EQ(cpu->note, "using 3 CPU virtual devices (--backend=cpu)");
  // The daemon's node identity reaches the platform.
  EXPECT_EQ(cpu->backend->Devices()[0].id, 2 * kMaxLocalDevices);
  EXPECT_EQ(cpu->backend->Devices()[0].process_index, 2);

  options.kind = "tpu";
  auto unknown = CreateBackend(options);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("got 'tpu'"));
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("auto,"));

  // Settings a platform refuses are INVALID_ARGUMENT, named or under auto.
  options.kind = "cpu";
  options.platforms.Mutable<CpuPlatformOptions>().num_devices = 0;
  EXPECT_EQ(CreateBackend(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlatformSelectionTest, EnginesComeFromThePlatformThatMadeTheBackend) {
  BackendOptions options;
  options.kind = "cpu";
  options.platforms.Mutable<CpuPlatformOptions>().num_devices = 2;
  options.platforms.Mutable<CpuPlatformOptions>().device_memory_bytes = 1 << 20;
  auto selection = CreateBackend(options);
  ASSERT_TRUE(selection.ok());
  auto engine = CreateCollectiveEngine(selection->backend.get());
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_TRUE((*engine)->CompletesInline());
}

TEST(PlatformOptionsTest, EachPlatformFindsItsOwnOptionsOrItsDefaults) {
  PlatformOptions options;
  EXPECT_EQ(options.Get<CpuPlatformOptions>().num_devices, CpuPlatformOptions().num_devices);
  options.Mutable<CpuPlatformOptions>().num_devices = 5;
  PlatformOptions copy = options;  // value semantics: copies do not share
  copy.Mutable<CpuPlatformOptions>().num_devices = 6;
  EXPECT_EQ(options.Get<CpuPlatformOptions>().num_devices, 5);
  EXPECT_EQ(copy.Get<CpuPlatformOptions>().num_devices, 6);
}

TEST(PlatformOptionsTest, RequestDevicesReachesWhicheverPlatformIsPicked) {
  BackendOptions options;
  options.kind = "cpu";
  RequestDevicesEverywhere(DeviceRequest{3, 1 << 20, 0}, &options.platforms);
  auto selection = CreateBackend(options);
  ASSERT_TRUE(selection.ok()) << selection.status();
  ASSERT_EQ(selection->backend->Devices().size(), 3u);
  EXPECT_EQ(selection->backend->Devices()[0].memory_limit_bytes, 1 << 20);
  // The same request as daemon flags.
  EXPECT_THAT(PlatformRegistry::Global().Find("cpu")->RequestFlags(DeviceRequest{3, 1 << 20, 0}),
              ElementsAre("--cpu_devices=3", "--cpu_device_memory=1048576"));
}

TEST(PlatformOptionsTest, VersionNotesSayWhatIsBuilt) {
  const Platform* cpu = PlatformRegistry::Global().Find("cpu");
  EXPECT_TRUE(cpu->compiled_in());
  EXPECT_EQ(cpu->BuildNote(), "cpu");
  const Platform* cuda = PlatformRegistry::Global().Find("cuda");
  EXPECT_EQ(cuda->compiled_in(), PLACEMENT_WITH_CUDA == 1);
  EXPECT_EQ(cuda->BuildNote(), PLACEMENT_WITH_CUDA ? "cuda (NCCL collectives)" : "CUDA off");
}

// Registers platforms that outrank cpu and cuda for the rest of this binary,
// so it comes last in the file.
TEST(PlatformSelectionTest, AutoFallsBackPastUnusablePlatformsAndStopsAtBadSettings) {
  if (GpuUsable()) GTEST_SKIP() << "a GPU is usable here: auto picks it";
  PlatformRegistry& registry = PlatformRegistry::Global();
  ASSERT_TRUE(registry.Register(std::make_unique<TestPlatform>(
      "test_absent", 500, absl::FailedPreconditionError("no TPU attached"))));
  BackendOptions options;
  options.platforms.Mutable<CpuPlatformOptions>().num_devices = 4;
  options.platforms.Mutable<CpuPlatformOptions>().device_memory_bytes = 4096;
  auto selection = CreateBackend(options);
  ASSERT_TRUE(selection.ok()) << selection.status();
  EXPECT_EQ(selection->platform->name(), "cpu");
  EXPECT_THAT(selection->note, HasSubstr("no usable TPU or GPU (no TPU attached; "));
  EXPECT_THAT(selection->note, HasSubstr("); falling back to 4 CPU virtual devices"));

  // The first usable platform by priority wins (after the unusable one).
  ASSERT_TRUE(
      registry.Register(std::make_unique<TestPlatform>("test_here", 400, absl::OkStatus())));
  selection = CreateBackend(options);
  ASSERT_TRUE(selection.ok()) << selection.status();
  EXPECT_EQ(selection->platform->name(), "test_here");
  EXPECT_THAT(selection->note, HasSubstr("falling back to 2 test devices"));

  // Bad settings stop auto instead of falling back.
  ASSERT_TRUE(registry.Register(std::make_unique<TestPlatform>(
      "test_misconfigured", 600, absl::InvalidArgumentError("tpu_cores must be >= 1"))));
  auto stopped = CreateBackend(options);
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(stopped.status().message()), HasSubstr("tpu_cores"));

  // Named explicitly, an unusable platform is FAILED_PRECONDITION with its reason.
  options.kind = "test_absent";
  auto absent = CreateBackend(options);
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(absent.status().message(),
            "--backend=test_absent but no TPU is usable: no TPU attached");
  EXPECT_THAT(registry.Names(),
              ElementsAre("test_misconfigured", "test_absent", "test_here", "cuda", "cpu"));
}

}  // namespace
}  // namespace placement::server
