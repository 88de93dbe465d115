// placectl prefetch and placectl top against a real daemon with 8 CPU
// devices.
#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/prefetch.h"
#include "tests/tools/placectl_fixture.h"

namespace placement::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using PlacectlStreamTest = PlacectlFixture;

TEST_F(PlacectlStreamTest, PrefetchStreamsADirectoryOfSingleArrayBatches) {
  ASSERT_EQ(Run({"mesh", "create", "data=4", "--mesh_id=m"}).exit_code, 0);
  std::filesystem::create_directories(Path("flat"));
  for (int b = 0; b < 5; ++b) {
    std::vector<float> values(8, static_cast<float>(b));
    WriteFile(Path("flat/batch_" + std::to_string(b) + ".npy"), Npy("<f4", "(8,)", Bytes(values)));
  }
  WriteFile(Path("flat/notes.txt"), "not a batch");
  auto r = Run({"prefetch", Path("flat"), "--mesh=m", "--spec=data", "--buffer_size=2",
                "--key=images", "--name=run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("BATCH  KEY     ID"));
  EXPECT_THAT(r.out, HasSubstr("f32[8]  m P('data')"));
  EXPECT_THAT(r.out, HasSubstr("4      images"));
  EXPECT_THAT(r.out, HasSubstr("batches: 5 staged (160 B), at most "));
  // Nothing a stream staged outlives it.
  EXPECT_THAT(Run({"--json", "tensor", "ls"}).out, Not(HasSubstr("\"id\"")));
}

TEST_F(PlacectlStreamTest, PrefetchStreamsPytreeBatchesFromSubdirectories) {
  for (int b = 0; b < 3; ++b) {
    std::string dir = Path("tree/" + std::to_string(b));
    std::filesystem::create_directories(dir);
    WriteFile(dir + "/images.npy", Npy("<f4", "(2, 3)", Bytes(std::vector<float>(6, 1.0f))));
    WriteFile(dir + "/labels.npy", Npy("<i4", "(2,)", Bytes(std::vector<int32_t>{b, b})));
  }
  auto r = Run({"--json", "prefetch", Path("tree"), "--rule=replicate", "--devices=1,2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"key\":\"images\""));
  EXPECT_THAT(r.out, HasSubstr("\"key\":\"labels\""));
  EXPECT_THAT(r.out, HasSubstr("\"sequence\":\"2\""));
  EXPECT_THAT(r.out, HasSubstr("\"batches_staged\":\"3\""));

  // A bad batch fails the stream with the file named, and frees what was
  // staged.
  WriteFile(Path("tree/1/labels.npy"), Npy("<i4", "(2,)", std::string(4, '\0')));
  auto bad = Run({"prefetch", Path("tree")});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("tree/1/labels.npy"));
  EXPECT_THAT(bad.err, HasSubstr("expected 8 data bytes for i32[2]"));

  std::filesystem::create_directories(Path("empty"));
  auto empty = Run({"prefetch", Path("empty")});
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_THAT(empty.err, HasSubstr("holds no .npy file and no batch subdirectory"));
  auto unknown_mesh = Run({"prefetch", Path("tree"), "--mesh=nope"});
  EXPECT_EQ(unknown_mesh.exit_code, 1);
  EXPECT_THAT(unknown_mesh.err, HasSubstr("NOT_FOUND"));
}

TEST_F(PlacectlStreamTest, TopShowsDevicesMemoryTensorsAndStreams) {
  ASSERT_EQ(Run({"mesh", "create", "data=2", "--mesh_id=pair"}).exit_code, 0);
  WriteFile(Path("x.npy"), Npy("<f4", "(1024,)", std::string(4096, '\0')));
  std::string big = RunForId({"tensor", "put", Path("x.npy"), "--replicated=pair", "--name=big"});
  auto once = Run({"top", "--once"});
  ASSERT_EQ(once.exit_code, 0) << once.err;
  EXPECT_THAT(once.out, HasSubstr("placementd "));
  EXPECT_THAT(once.out, HasSubstr("serving"));
  EXPECT_THAT(once.out, HasSubstr("DEV  NODE  KIND"));
  EXPECT_THAT(once.out, HasSubstr("IN USE / LIMIT"));
  EXPECT_THAT(once.out, HasSubstr("4.0 KiB / "));  // devices 0 and 1 hold a copy each
  EXPECT_THAT(once.out,
              HasSubstr("meshes: 1   tensors: 1 (8.0 KiB on devices)   prefetch streams: 0"));
  EXPECT_THAT(once.out, HasSubstr("TENSOR"));
  EXPECT_THAT(once.out, HasSubstr(big));
  EXPECT_THAT(once.out, Not(HasSubstr("\x1b[")));  // not a terminal: no redraw codes

  auto frames = Run({"top", "--iterations=3", "--interval=0s"});
  ASSERT_EQ(frames.exit_code, 0) << frames.err;
  size_t count = 0;
  for (size_t at = frames.out.find("DEV  NODE"); at != std::string::npos;
       at = frames.out.find("DEV  NODE", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 3u);

  auto json = Run({"--json", "top", "--once", "--top_tensors=0"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, HasSubstr("{\"status\":{"));
  EXPECT_THAT(json.out, HasSubstr("\"num_prefetch_streams\":\"0\""));
  EXPECT_THAT(json.out, HasSubstr("\"devices\":{\"devices\":["));
  EXPECT_THAT(json.out, HasSubstr(big));
  EXPECT_EQ(Run({"tensor", "rm", big}).exit_code, 0);
}

TEST_F(PlacectlStreamTest, TopAndStatusCountOpenPrefetchStreams) {
  auto stream = client::PrefetchStream::Open(*client_);
  ASSERT_TRUE(stream.ok()) << stream.status();
  client::HostBatch batch;
  batch.Add<float>("x", std::vector<float>{1, 2}, {2});
  ASSERT_TRUE((*stream)->SendBatch(batch.Views()).ok());
  auto ready = (*stream)->Read();  // the daemon has the stream open now
  ASSERT_TRUE(ready.ok()) << ready.status();
  ASSERT_TRUE(ready->has_value());
  auto top = Run({"top", "--once"});
  EXPECT_EQ(top.exit_code, 0) << top.err;
  EXPECT_THAT(top.out, HasSubstr("prefetch streams: 1"));
  auto status = Run({"status"});
  EXPECT_THAT(status.out, HasSubstr("streams:      1 prefetch"));
  ASSERT_TRUE((*stream)->Release(0).ok());
  ASSERT_TRUE((*stream)->CloseSend().ok());
  auto end = (*stream)->Read();
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->has_value());
}

}  // namespace
}  // namespace placement::testing
