// Bounded streams against a real daemon: an upload that reserved every byte
// and then sends nothing is reaped after --stream_idle_timeout and others can
// allocate again; 3,000 idle streams are held and the next one is refused
// RESOURCE_EXHAUSTED (--max_streams), and per tenant (--tenant_max_streams).
#include <signal.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/v1/daemon_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"
#include "server/auth/credentials_file.h"
#include "tests/testing/daemon_process.h"

namespace placement {
namespace {

namespace pb = placement::v1;
using testing::DaemonProcess;
using ::testing::HasSubstr;

struct OpenUpload {
  std::unique_ptr<grpc::ClientContext> context = std::make_unique<grpc::ClientContext>();
  pb::UploadResponse response;
  std::unique_ptr<grpc::ClientWriter<pb::UploadRequest>> writer;
};

pb::UploadRequest Header(int64_t bytes) {
  pb::UploadRequest header;
  header.mutable_header()->set_dtype(pb::DTYPE_U8);
  header.mutable_header()->add_shape(bytes);
  return header;
}

// A complete upload of u8[bytes] on device 0.
grpc::Status UploadAll(pb::TensorService::Stub& stub, int64_t bytes) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  pb::UploadResponse response;
  auto writer = stub.Upload(&context, &response);
  writer->Write(Header(bytes));
  pb::UploadRequest chunk;
  chunk.set_chunk(std::string(bytes, 'z'));
  writer->Write(chunk);
  writer->WritesDone();
  return writer->Finish();
}

int64_t OpenStreams(pb::DaemonService::Stub& stub) {
  grpc::ClientContext context;
  pb::GetStatusResponse status;
  EXPECT_TRUE(stub.GetStatus(&context, {}, &status).ok());
  return status.num_open_streams();
}

// Polls (bounded far above what the daemon needs) until `done` holds.
template <typename Fn>
bool Eventually(Fn done) {
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  while (!done()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return true;
}

TEST(StreamLimitsTest, StalledUploadIsReapedAndFreesItsReservation) {
  // A budget of 1 MiB and a page: a 1 MiB buffer, with its host record
  // (kCpuBufferOverheadBytes), fills it.
  auto daemon = DaemonProcess::Start(
      {.extra_flags = {"--backend=cpu", "--cpu_devices=1", "--cpu_device_memory=1052672",
                       "--stream_idle_timeout=1s"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto channel = grpc::CreateChannel((*daemon)->address(), grpc::InsecureChannelCredentials());
  auto tensors = pb::TensorService::NewStub(channel);

  // The stalled client: a header that reserves the whole device, then nothing.
  OpenUpload stalled;
  stalled.writer = tensors->Upload(stalled.context.get(), &stalled.response);
  ASSERT_TRUE(stalled.writer->Write(Header(1 << 20)));
  // Its stream ends CANCELLED once the daemon reaps it...
  grpc::Status reaped = stalled.writer->Finish();
  EXPECT_EQ(reaped.error_code(), grpc::StatusCode::CANCELLED);
  // ...and the whole device is free for the next client.
  EXPECT_TRUE(Eventually([&] { return UploadAll(*tensors, 1 << 20).ok(); }));
  EXPECT_THAT((*daemon)->Stderr(), HasSubstr("made no progress for 1s; cancelling it"));
  EXPECT_EQ((*daemon)->Stop(SIGTERM), 0);
}

TEST(StreamLimitsTest, ThreeThousandIdleStreamsThenRefused) {
  constexpr int kLimit = 3000;
  auto daemon =
      DaemonProcess::Start({.extra_flags = {"--backend=cpu", "--cpu_devices=1",
                                            "--max_streams=3000", "--stream_idle_timeout=1h"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto channel = grpc::CreateChannel((*daemon)->address(), grpc::InsecureChannelCredentials());
  auto tensors = pb::TensorService::NewStub(channel);
  auto status = pb::DaemonService::NewStub(channel);

  std::vector<OpenUpload> idle(kLimit);
  for (OpenUpload& upload : idle) {
    upload.writer = tensors->Upload(upload.context.get(), &upload.response);
  }
  ASSERT_TRUE(Eventually([&] { return OpenStreams(*status) == kLimit; }))
      << OpenStreams(*status) << " streams registered";

  grpc::Status refused = UploadAll(*tensors, 16);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(refused.error_message(),
            "3000 streams are open; the daemon allows at most 3000 (--max_streams)");

  for (OpenUpload& upload : idle) upload.context->TryCancel();
  for (OpenUpload& upload : idle) upload.writer->Finish();
  ASSERT_TRUE(Eventually([&] { return OpenStreams(*status) == 0; }));
  EXPECT_TRUE(UploadAll(*tensors, 16).ok());
  EXPECT_EQ((*daemon)->Stop(SIGTERM), 0);
}

std::string Sha256Hex(const std::string& token) {
  std::string hex;
  for (uint8_t b : server::DigestToken(token)) hex += absl::StrCat(absl::Hex(b, absl::kZeroPad2));
  return hex;
}

TEST(StreamLimitsTest, PerTenantStreamLimit) {
  testing::TempDir dir;
  const std::string creds = dir.path() + "/creds";
  std::ofstream(creds) << "token sha256:" << Sha256Hex("a-token") << " team-a user\n"
                       << "token sha256:" << Sha256Hex("b-token") << " team-b user\n";
  auto daemon =
      DaemonProcess::Start({.extra_flags = {"--backend=cpu", "--cpu_devices=1",
                                            "--tenant_max_streams=2", "--auth_file=" + creds}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto channel = grpc::CreateChannel((*daemon)->address(), grpc::InsecureChannelCredentials());
  auto tensors = pb::TensorService::NewStub(channel);
  auto status = pb::DaemonService::NewStub(channel);
  auto open_streams = [&] {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer a-token");
    pb::GetStatusResponse response;
    EXPECT_TRUE(status->GetStatus(&context, {}, &response).ok());
    return response.num_open_streams();
  };
  auto upload_as = [&](const std::string& token) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + token);
    pb::UploadResponse response;
    auto writer = tensors->Upload(&context, &response);
    writer->Write(Header(16));
    pb::UploadRequest chunk;
    chunk.set_chunk(std::string(16, 'q'));
    writer->Write(chunk);
    writer->WritesDone();
    return writer->Finish();
  };

  std::vector<OpenUpload> idle(2);
  for (OpenUpload& upload : idle) {
    upload.context->AddMetadata("authorization", "Bearer a-token");
    upload.writer = tensors->Upload(upload.context.get(), &upload.response);
  }
  ASSERT_TRUE(Eventually([&] { return open_streams() == 2; }));
  grpc::Status refused = upload_as("a-token");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(refused.error_message(),
            "tenant 'team-a' has 2 streams open; at most 2 (--tenant_max_streams)");
  EXPECT_TRUE(upload_as("b-token").ok());  // another tenant is not affected

  for (OpenUpload& upload : idle) upload.context->TryCancel();
  for (OpenUpload& upload : idle) upload.writer->Finish();
  ASSERT_TRUE(Eventually([&] { return open_streams() == 0; }));
  EXPECT_TRUE(upload_as("a-token").ok());
  EXPECT_EQ((*daemon)->Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace placement
