// The client API against a real daemon, for what issue 25 changed: the
// session every client opens unless told otherwise (a killed client's
// results are freed once its lease runs out), a refused connection failing
// at once (a failed attempt where something listens is retried), progress
// callbacks, ListStreams, PrefetchStream::Next, tensor names and derived
// names.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/placement.h"
#include "tests/client/dropping_listener.h"
#include "tests/testing/daemon_process.h"

namespace placement::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

class ClientApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = testing::DaemonProcess::Start(
        {.extra_flags = {"--cpu_devices=4", "--cpu_device_memory=268435456"}});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    ClientOptions durable;
    durable.session_policy = SessionPolicy::kNone;
    auto observer = Client::Connect(daemon_->address(), durable);
    ASSERT_TRUE(observer.ok()) << observer.status();
    observer_ = *std::move(observer);
  }

  int64_t InUse(int64_t device) const {
    auto devices = observer_->ListDevices();
    EXPECT_TRUE(devices.ok()) << devices.status();
    return devices.ok() ? (*devices)[device].memory_in_use_bytes : -1;
  }

  // Polls (bounded) until `device` holds `bytes`.
  bool Eventually(int64_t device, int64_t bytes, absl::Duration limit = absl::Seconds(30)) {
    const absl::Time deadline = absl::Now() + limit;
    while (InUse(device) != bytes) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return true;
  }

  std::unique_ptr<testing::DaemonProcess> daemon_;
  std::unique_ptr<Client> observer_;
};

std::vector<float> Floats(size_t n) { return std::vector<float>(n, 1.0f); }

// Every (done, total) a transfer reports, through the callback it makes.
struct ProgressLog {
  std::vector<std::pair<int64_t, int64_t>> seen;
  std::function<void(int64_t, int64_t)> Callback() {
    return [this](int64_t done, int64_t total) { seen.emplace_back(done, total); };
  }
};

TEST_F(ClientApiTest, AClientsResultsLiveAsLongAsItsSession) {
  std::string kept_id;
  {
    auto client = Client::Connect(daemon_->address());
    ASSERT_TRUE(client.ok()) << client.status();
    EXPECT_FALSE((*client)->session_id().empty());
    TensorClient tensors(**client);
    std::vector<float> data = Floats(1024);
    auto gone = tensors.Upload(HostArray::Of(data, {1024}), Placement::Device(1));
    auto kept = tensors.Upload(HostArray::Of(data, {1024}), Placement::Device(2));
    ASSERT_TRUE(gone.ok() && kept.ok());
    ASSERT_TRUE(tensors.Persist({kept->id}).ok());
    kept_id = kept->id;
    EXPECT_EQ(InUse(1), 4096);
  }  // the destructor closes the session
  EXPECT_EQ(InUse(1), 0);
  EXPECT_EQ(InUse(2), 4096);
  ASSERT_TRUE(TensorClient(*observer_).Delete({kept_id}).ok());
  // Durable by choice.
  EXPECT_TRUE(observer_->session_id().empty());
  std::vector<float> data = Floats(16);
  auto durable = TensorClient(*observer_).Upload(HostArray::Of(data, {16}), Placement::Device(0));
  ASSERT_TRUE(durable.ok());
  ASSERT_TRUE(TensorClient(*observer_).Delete({durable->id}).ok());
}

TEST_F(ClientApiTest, AKilledClientsResultsAreFreedWhenItsLeaseRunsOut) {
  const char* child_bin = std::getenv("SESSION_CHILD_BIN");
  ASSERT_NE(child_bin, nullptr);
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  pid_t child = fork();
  if (child == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    execl(child_bin, child_bin, daemon_->address().c_str(), "1", nullptr);
    _exit(127);
  }
  close(out[1]);
  std::string id;
  char c;
  while (read(out[0], &c, 1) == 1 && c != '\n') id.push_back(c);
  close(out[0]);
  ASSERT_TRUE(absl::StartsWith(id, "t-")) << id;
  EXPECT_EQ(InUse(3), 4 << 20);
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  waitpid(child, &status, 0);
  // Nothing deletes it but the daemon, once the 1 s lease has run out.
  EXPECT_TRUE(Eventually(3, 0)) << InUse(3);
  EXPECT_EQ(TensorClient(*observer_).Describe(id).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClientApiTest, ARefusedConnectionFailsAtOnce) {
  // Nothing listens on a port just closed; a timeout this test would not
  // outlive: only the refusal can end the wait.
  ClientOptions options;
  options.connect_timeout = absl::Hours(1);
  auto client = Client::Connect("127.0.0.1:1", options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(client.status().message(),
              HasSubstr("cannot reach placementd at 127.0.0.1:1: the connection failed"));
}

TEST_F(ClientApiTest, AFirstAttemptThatFailsWhereSomethingListensIsRetried) {
  // gRPC reports the dropped first connection as a failure; something listens
  // there, so its reconnection gets a grace and the client connects.
  testing::DroppingListener listener(daemon_->address(), /*drop=*/1);
  ClientOptions options;
  options.connect_timeout = absl::Hours(1);
  options.session_policy = SessionPolicy::kNone;
  auto client = Client::Connect(listener.target(), options);
  ASSERT_TRUE(client.ok()) << client.status();
  auto devices = (*client)->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ(devices->size(), 4u);
  EXPECT_GE(listener.accepted(), 3);  // the dropped one, the probe, gRPC's second
}

TEST_F(ClientApiTest, AListenerThatNeverSpeaksGrpcFailsAfterTheGrace) {
  // Not the hour-long connect timeout: the failure stands once gRPC's
  // reconnections failed for the grace.
  testing::DroppingListener listener("", /*drop=*/0);
  ClientOptions options;
  options.connect_timeout = absl::Hours(1);
  auto client = Client::Connect(listener.target(), options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(client.status().message(), HasSubstr("cannot reach placementd at " +
                                                   listener.target() + ": the connection failed"));
}

TEST_F(ClientApiTest, ProgressCallbacksSeeEveryChunk) {
  std::vector<float> data = Floats(3 << 18);  // 3 MiB
  ProgressLog log;
  std::vector<std::pair<int64_t, int64_t>>& seen = log.seen;
  UploadOptions upload;
  upload.path = TransferPath::kStream;
  upload.progress = log.Callback();
  TensorClient tensors(*observer_);
  auto info = tensors.Upload(HostArray::Of(data, {3 << 18}), Placement::Device(0), upload);
  ASSERT_TRUE(info.ok()) << info.status();
  const int64_t mib = 1 << 20;
  EXPECT_THAT(seen,
              ElementsAre(Pair(mib, 3 * mib), Pair(2 * mib, 3 * mib), Pair(3 * mib, 3 * mib)));
  seen.clear();
  DownloadOptions download;
  download.path = TransferPath::kStream;
  download.progress = upload.progress;
  std::vector<float> back(data.size());
  ASSERT_TRUE(
      tensors.Download(info->id, AsWritableBytes(back), DownloadSelection::Whole(), download).ok());
  EXPECT_THAT(seen,
              ElementsAre(Pair(mib, 3 * mib), Pair(2 * mib, 3 * mib), Pair(3 * mib, 3 * mib)));
  seen.clear();
  upload.path = TransferPath::kRegion;  // a same-host daemon: one region, reported at its end
  auto region = tensors.Upload(HostArray::Of(data, {3 << 18}), Placement::Device(1), upload);
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_THAT(seen, ElementsAre(Pair(3 * mib, 3 * mib)));
  ASSERT_TRUE(tensors.Delete({info->id, region->id}).ok());
}

// In place (a same-host daemon): the copies tell progress every 64 MiB
// (PieceProgress), not only at the end of a shard.
TEST_F(ClientApiTest, InPlaceTransfersTellProgressAsTheyCopy) {
  const int64_t mib = 1 << 20;
  std::vector<float> data = Floats(130 << 18);  // 130 MiB
  ProgressLog log;
  std::vector<std::pair<int64_t, int64_t>>& seen = log.seen;
  UploadOptions upload;
  upload.path = TransferPath::kInPlace;
  upload.progress = log.Callback();
  TensorClient tensors(*observer_);
  auto info = tensors.Upload(HostArray::Of(data, {130 << 18}), Placement::Device(2), upload);
  auto devices = observer_->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  if ((*devices)[2].platform != "cpu") {
    // A GPU daemon (PLACEMENT_TEST_BACKEND=cuda) does not hand out device
    // memory for writing: kInPlace is refused, nothing is reported.
    EXPECT_EQ(info.status().code(), absl::StatusCode::kUnimplemented) << info.status();
    EXPECT_THAT(info.status().message(), HasSubstr("cannot hand out device memory"));
    EXPECT_TRUE(seen.empty());
    GTEST_SKIP() << "the " << (*devices)[2].platform << " platform does not write in place";
  }
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(seen, ElementsAre(Pair(64 * mib, 130 * mib), Pair(128 * mib, 130 * mib),
                                Pair(130 * mib, 130 * mib)));
  seen.clear();
  DownloadOptions download;
  download.path = TransferPath::kInPlace;
  download.progress = upload.progress;
  std::vector<float> back(data.size());
  ASSERT_TRUE(
      tensors.Download(info->id, AsWritableBytes(back), DownloadSelection::Whole(), download).ok());
  EXPECT_THAT(seen, ElementsAre(Pair(64 * mib, 130 * mib), Pair(128 * mib, 130 * mib),
                                Pair(130 * mib, 130 * mib)));
  EXPECT_TRUE(back == data);
  ASSERT_TRUE(tensors.Delete({info->id}).ok());
}

TEST_F(ClientApiTest, ListStreamsShowsAnUploadInFlight) {
  TensorClient tensors(*observer_);
  UploadOptions options;
  options.name = "slow";
  auto up = tensors.StartUpload(DType::kU8, {4 << 20}, Placement::Device(0), options);
  ASSERT_TRUE(up.ok()) << up.status();
  std::vector<uint8_t> piece(1 << 20);
  ASSERT_TRUE((*up)->Write(piece).ok());
  ASSERT_TRUE((*up)->Write(piece).ok());  // 2 of 4 MiB: the daemon counts them as they arrive
  std::vector<StreamStatus> streams;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    auto listed = observer_->ListStreams();
    ASSERT_TRUE(listed.ok()) << listed.status();
    streams = *listed;
    if (streams.size() == 1 && streams[0].bytes == (2 << 20)) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(streams.size(), 1u);
  EXPECT_EQ(streams[0].kind, StreamKind::kUpload);
  EXPECT_EQ(streams[0].what, "slow u8[4194304]");
  EXPECT_EQ(streams[0].bytes, 2 << 20);
  EXPECT_EQ(streams[0].total_bytes, 4 << 20);
  EXPECT_THAT(ToJson(streams), HasSubstr("\"kind\":\"STREAM_KIND_UPLOAD\""));
  (*up)->Cancel();
  const absl::Time gone = absl::Now() + absl::Seconds(30);
  while (absl::Now() < gone && !observer_->ListStreams()->empty()) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(observer_->ListStreams()->empty());
}

TEST_F(ClientApiTest, PrefetchStreamNextReturnsBatches) {
  PrefetchOptions options;
  options.buffer_size = 2;
  options.release = ReleaseMode::kOnNext;
  auto stream = PrefetchStream::Open(*observer_, options);
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<float> values = {1, 2, 3, 4};
  HostBatch batch;
  batch.Add("x", values, {4});
  ASSERT_TRUE((*stream)->SendBatch(batch.Views()).ok());
  auto first = (*stream)->Next();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ((*first)->sequence, 0);
  EXPECT_EQ((*first)->tensor("x").shape, std::vector<int64_t>{4});
  ASSERT_TRUE((*stream)->CloseSend().ok());
  auto end = (*stream)->Next();
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->has_value());
  EXPECT_TRUE((*stream)->stats().has_value());
}

TEST_F(ClientApiTest, NamesWorkWhereIdsDoAndResultsGetDerivedNames) {
  TensorClient tensors(*observer_);
  auto mesh = MeshClient(*observer_).CreateDataParallel(2);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::vector<float> data = {1, 2, 3, 4};
  UploadOptions named;
  named.name = "batch/images";
  auto x = tensors.Upload(HostArray::Of(data, {4}), Placement::Sharded(*mesh, {{"data"}}), named);
  ASSERT_TRUE(x.ok()) << x.status();
  auto described = tensors.Describe("batch/images");
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->id, x->id);
  auto reduced = CollectiveClient(*observer_).AllReduce("batch/images", ReduceOp::kSum);
  ASSERT_TRUE(reduced.ok()) << reduced.status();
  EXPECT_EQ(reduced->name, "batch/images:all_reduce");
  auto placed = tensors.Place("batch/images", Placement::Device(1));
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->name, "batch/images:place");
  auto again = tensors.Place("batch/images", Placement::Device(0));
  ASSERT_TRUE(again.ok());
  auto ambiguous = tensors.Describe("batch/images:place");
  EXPECT_EQ(ambiguous.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ambiguous.status().message(),
              HasSubstr(absl::StrCat("tensor_id 'batch/images:place' is the name of 2 tensors (")));
  EXPECT_THAT(ambiguous.status().message(), HasSubstr(placed->id));
  EXPECT_EQ(tensors.Describe("no-such-name").status().code(), absl::StatusCode::kNotFound);
  // Donated, the result takes over the source's name.
  auto moved = tensors.Place(placed->id, Placement::Device(2), SourceHandling::kDonate);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->name, "batch/images:place");
  ASSERT_TRUE(tensors.Delete({x->id, reduced->id, again->id, moved->id}).ok());
  ASSERT_TRUE(MeshClient(*observer_).Delete(mesh->id).ok());
}

}  // namespace
}  // namespace placement::client
