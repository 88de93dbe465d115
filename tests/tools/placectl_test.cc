// placectl end to end against a real daemon: tables, JSON, errors.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_process.h"

namespace placement {
namespace {

using ::testing::HasSubstr;
using testing::PlacectlBinary;
using testing::RunCommand;

class PlacectlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon =
        testing::DaemonProcess::Start({.extra_flags = {"--backend=cpu", "--cpu_devices=4"}});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
  }
  testing::CommandResult Run(std::vector<std::string> args) {
    std::vector<std::string> argv = {PlacectlBinary(), "--target=" + daemon_->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }
  std::unique_ptr<testing::DaemonProcess> daemon_;
};

TEST_F(PlacectlTest, DevicesTable) {
  auto r = Run({"devices"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ID  PLATFORM"));
  EXPECT_THAT(r.out, HasSubstr("3   cpu"));
}

TEST_F(PlacectlTest, DevicesJson) {
  auto r = Run({"--json", "devices"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"devices\":["));
  EXPECT_THAT(r.out, HasSubstr("\"platform\":\"cpu\""));
}

TEST_F(PlacectlTest, InfoAndStatus) {
  auto info = Run({"info"});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_THAT(info.out, HasSubstr("num_devices:   4"));
  EXPECT_THAT(info.out, HasSubstr("hardware_type: cpu"));
  auto status = Run({"--json", "status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("\"backend\":\"cpu\""));
}

// placectl trim: the daemon's cached memory back now (every tenant's with
// authentication off), as text and JSON; a tenant the daemon never saw is
// NOT_FOUND.
TEST_F(PlacectlTest, TrimGivesCachedMemoryBack) {
  auto text = Run({"trim"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("cache released: "));
  EXPECT_THAT(text.out, HasSubstr("(every tenant)"));
  EXPECT_THAT(text.out, HasSubstr("resident:       "));
  auto json = Run({"--json", "trim"});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, HasSubstr("\"resident_bytes_before\""));
  auto unknown = Run({"trim", "--tenant=team-z"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err,
              HasSubstr("NOT_FOUND: TrimMemory: tenant 'team-z' has never held memory on this "
                        "daemon"));
}

TEST_F(PlacectlTest, BatchSize) {
  auto r = Run({"batch-size", "--hardware=h100"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("critical:  298"));
  EXPECT_THAT(r.out, HasSubstr("roofline:  295"));
  auto json = Run({"--json", "batch-size"});
  EXPECT_THAT(json.out, HasSubstr("\"hardware_type_name\":\"cpu\""));
}

TEST_F(PlacectlTest, ValidateBatchSize) {
  auto r = Run({"validate-batch-size", "8", "--hardware=v100"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("valid:   false"));
  EXPECT_THAT(r.out, HasSubstr("Batch size 8 is below minimum recommended 16 for v100."));
  auto usage = Run({"validate-batch-size", "eight"});
  EXPECT_EQ(usage.exit_code, 2);
}

TEST_F(PlacectlTest, ErrorsCarryTheGrpcCode) {
  auto r = Run({"batch-size", "--hardware=quantum"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("INVALID_ARGUMENT: unknown hardware type 'quantum'"));
  auto unknown = Run({"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("unknown command 'frobnicate'"));
}

TEST(PlacectlNoDaemonTest, UnreachableTargetFails) {
  auto r = RunCommand({PlacectlBinary(), "--target=unix:/nonexistent/placementd.sock",
                       "--timeout_seconds=1", "devices"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("UNAVAILABLE"));
}

}  // namespace
}  // namespace placement
