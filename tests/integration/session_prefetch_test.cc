// Prefetch streams opened in a session belong to it (docs/api/sessions.md):
// when the session's lease expires without renewal, or it is closed, the
// stream is cancelled and every batch it staged is freed -- device memory
// back to its baseline -- while a stream outside the session goes on. A real
// placementd process, the client library's PrefetchStream, and raw
// SessionService calls (so the lease is never renewed).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/client.h"
#include "placement/client/prefetch.h"
#include "placement/client/tensors.h"
#include "placement/v1/session_service.grpc.pb.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/device_memory.h"

namespace placement {
namespace {

namespace pb = placement::v1;
using client::PrefetchStream;
using testing::DaemonProcess;
using ::testing::HasSubstr;

constexpr int64_t kBatchFloats = 64 * 1024;  // 256 KiB a batch

class SessionPrefetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = DaemonProcess::Start(
        {.extra_flags = {"--backend=cpu", "--cpu_devices=2", "--session_sweep_interval=100ms"}});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto c = daemon_->Connect();
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    sessions_ = pb::SessionService::NewStub(
        grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials()));
    baseline_ = MemoryInUse();
  }

  // Opens a session with a `ttl_seconds` lease that nobody renews.
  std::string OpenSession(int ttl_seconds) {
    grpc::ClientContext context;
    pb::OpenSessionRequest request;
    request.mutable_ttl()->set_seconds(ttl_seconds);
    pb::OpenSessionResponse response;
    grpc::Status s = sessions_->OpenSession(&context, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.session().id();
  }
  grpc::Status RenewSession(const std::string& id) {
    grpc::ClientContext context;
    pb::RenewSessionRequest request;
    request.set_session_id(id);
    pb::RenewSessionResponse response;
    return sessions_->RenewSession(&context, request, &response);
  }
  grpc::Status CloseSession(const std::string& id) {
    grpc::ClientContext context;
    pb::CloseSessionRequest request;
    request.set_session_id(id);
    pb::CloseSessionResponse response;
    return sessions_->CloseSession(&context, request, &response);
  }

  // A client whose calls join session `id`.
  std::unique_ptr<client::Client> InSession(const std::string& id) {
    client::ClientOptions options;
    options.session_id = id;
    auto c = client::Client::Connect(daemon_->address(), options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  int64_t MemoryInUse() { return testing::TotalMemoryInUse(*client_); }

  // Sends two batches and reads both (staged, unreleased): the daemon holds
  // 2 x 256 KiB for the stream.
  void StageTwoBatches(PrefetchStream& stream) {
    std::vector<float> data(kBatchFloats, 1.5f);
    for (int k = 0; k < 2; ++k) {
      auto seq = stream.SendBatch({{"x", client::HostArray::Of(data, {kBatchFloats})}});
      ASSERT_TRUE(seq.ok()) << seq.status();
    }
    for (int k = 0; k < 2; ++k) {
      auto batch = stream.Read();
      ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
      EXPECT_EQ((*batch)->sequence, k);
    }
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<pb::SessionService::Stub> sessions_;
  int64_t baseline_ = 0;
};

TEST_F(SessionPrefetchTest, ExpiredLeaseCancelsTheStreamAndFreesItsBatches) {
  // Long enough that the setup below fits in the first lease on a loaded
  // 2-core machine (the whole suite runs -j2 next to sanitizer builds).
  const std::string session = OpenSession(/*ttl_seconds=*/8);
  ASSERT_FALSE(session.empty());
  auto member = InSession(session);
  ASSERT_NE(member, nullptr);
  client::PrefetchOptions options;
  options.buffer_size = 2;
  auto stream = PrefetchStream::Open(*member, options);
  ASSERT_TRUE(stream.ok()) << stream.status();
  StageTwoBatches(**stream);
  // A stream outside any session, holding a batch of its own.
  auto durable = PrefetchStream::Open(*client_, options);
  ASSERT_TRUE(durable.ok()) << durable.status();
  std::vector<float> data(kBatchFloats, 2.5f);
  ASSERT_TRUE((*durable)->SendBatch({{"x", client::HostArray::Of(data, {kBatchFloats})}}).ok());
  auto durable_batch = (*durable)->Read();
  ASSERT_TRUE(durable_batch.ok() && durable_batch->has_value()) << durable_batch.status();
  grpc::Status renewed = RenewSession(session);
  ASSERT_TRUE(renewed.ok()) << renewed.error_message();
  const int64_t batch_bytes = kBatchFloats * 4;
  EXPECT_EQ(MemoryInUse(), baseline_ + 3 * batch_bytes);

  // The last renewal (the setup above ran inside the first lease): from now
  // on nobody renews, the lease runs out, the sweeper ends the session, and the
  // stream ends with it. Read blocks until then.
  auto ended = (*stream)->Read();
  ASSERT_FALSE(ended.ok());
  EXPECT_EQ(ended.status().code(), absl::StatusCode::kCancelled) << ended.status();
  EXPECT_THAT(ended.status().message(), HasSubstr("session '" + session + "' ended"));
  // The batches were freed before the status was sent; the other stream's
  // batch is still there.
  EXPECT_EQ(MemoryInUse(), baseline_ + batch_bytes);
  // The sweeper logs the expiry after it ended the session's streams, tensors
  // and the other things its end listeners free (regions, views, meshes):
  // wait (bounded) for the line.
  const std::string expired = "session " + session + " expired";
  for (int i = 0; i < 250 && daemon_->Stderr().find(expired) == std::string::npos; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_THAT(daemon_->Stderr(), HasSubstr(expired));

  ASSERT_TRUE((*durable)->Release(0).ok());
  ASSERT_TRUE((*durable)->CloseSend().ok());
  auto end = (*durable)->Read();
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->has_value());
  EXPECT_EQ(MemoryInUse(), baseline_);
}

TEST_F(SessionPrefetchTest, ClosingTheSessionCancelsTheStream) {
  const std::string session = OpenSession(/*ttl_seconds=*/600);
  auto member = InSession(session);
  ASSERT_NE(member, nullptr);
  client::PrefetchOptions options;
  options.buffer_size = 2;
  auto stream = PrefetchStream::Open(*member, options);
  ASSERT_TRUE(stream.ok()) << stream.status();
  StageTwoBatches(**stream);
  EXPECT_EQ(MemoryInUse(), baseline_ + 2 * kBatchFloats * 4);

  grpc::Status closed = CloseSession(session);
  ASSERT_TRUE(closed.ok()) << closed.error_message();
  auto ended = (*stream)->Read();
  ASSERT_FALSE(ended.ok());
  EXPECT_EQ(ended.status().code(), absl::StatusCode::kCancelled) << ended.status();
  EXPECT_EQ(MemoryInUse(), baseline_);

  // A stream cannot join the ended session.
  auto late = PrefetchStream::Open(*member, options);
  ASSERT_TRUE(late.ok()) << late.status();
  auto refused = (*late)->Read();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kNotFound) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("placement-session metadata"));
}

}  // namespace
}  // namespace placement
