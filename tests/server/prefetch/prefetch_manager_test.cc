// PrefetchManager: stream registration and shutdown, and the metrics a
// pipeline feeds (counters and scrape-time gauges in the Prometheus text).
#include "server/prefetch/prefetch_manager.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/service/from_proto.h"
#include "tests/server/tensor/tensor_test_util.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;
using ::testing::HasSubstr;
using testing::TestRig;

TEST(PrefetchManagerTest, ShutdownAbortsOpenStreamsOnceAndRefusesNewOnes) {
  TestRig rig;
  PrefetchManager manager(rig.ops.get(), nullptr);
  std::vector<absl::Status> aborted;
  auto a = manager.Register([&](const absl::Status& s) { aborted.push_back(s); });
  auto b = manager.Register([&](const absl::Status& s) { aborted.push_back(s); });
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  manager.Unregister(*b);
  EXPECT_EQ(manager.open_streams(), 1);

  manager.StartShutdown();
  ASSERT_EQ(aborted.size(), 1u);
  EXPECT_EQ(aborted[0].code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(aborted[0].message(), HasSubstr("shutting down"));
  manager.StartShutdown();  // nothing registered any more
  EXPECT_EQ(aborted.size(), 1u);
  manager.Unregister(*a);  // after shutdown: a no-op

  auto late = manager.Register([&](const absl::Status& s) { aborted.push_back(s); });
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable);
}

TEST(PrefetchManagerTest, PipelinesFeedCountersAndGauges) {
  TestRig rig;
  Metrics metrics;
  PrefetchManager manager(rig.ops.get(), &metrics);
  manager.metrics()->StreamOpened();
  PrefetchConfig config;
  config.buffer_size = 2;
  std::unique_ptr<PrefetchPipeline> pipeline = manager.NewPipeline(config);

  pb::BatchHeader header;
  pb::ArrayHeader* array = header.add_arrays();
  array->set_key("x");
  array->set_dtype(pb::DTYPE_F32);
  array->add_shape(16);
  ASSERT_TRUE(pipeline->OnBatchHeader(BatchHeaderFromProto(header)).ok());
  EXPECT_THAT(metrics.Render(), HasSubstr("placementd_prefetch_batches_held 1"));
  ASSERT_TRUE(pipeline->OnBatchChunk(0, std::string(64, 'a')).ok());
  EXPECT_EQ(metrics.CounterValue("placementd_prefetch_batches_staged_total"), 1);
  EXPECT_EQ(metrics.CounterValue("placementd_prefetch_bytes_staged_total"), 64);
  EXPECT_THAT(metrics.Render(), HasSubstr("placementd_prefetch_device_bytes_held 64"));
  EXPECT_THAT(metrics.Render(), HasSubstr("placementd_prefetch_streams_open 1"));

  pipeline->Close();
  manager.metrics()->StreamClosed(absl::StatusCode::kOk);
  std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("placementd_prefetch_batches_held 0"));
  EXPECT_THAT(text, HasSubstr("placementd_prefetch_device_bytes_held 0"));
  EXPECT_THAT(text, HasSubstr("placementd_prefetch_streams_open 0"));
  EXPECT_EQ(metrics.CounterValue("placementd_prefetch_streams_total", {{"result", "ok"}}), 1);
  EXPECT_EQ(rig.MemoryInUse(), 0);
}

}  // namespace
}  // namespace placement::server
