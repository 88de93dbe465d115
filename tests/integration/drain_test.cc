// Draining a real daemon process: while a long-lived call is in flight,
// SIGTERM turns health NOT_SERVING and refuses new calls with UNAVAILABLE;
// the in-flight call still completes, and the process exits 0.
#include <signal.h>

#include <future>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/v1/daemon_service.grpc.pb.h"
#include "placement/v1/device_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"
#include "tests/testing/daemon_process.h"

namespace placement {
namespace {

using ::testing::HasSubstr;

// grpc.health.v1.Health/Check for service "" with raw bytes: the request is
// the empty message; the response's field 1 is the status (1 SERVING,
// 2 NOT_SERVING).
int HealthStatus(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  grpc::Slice empty(std::string{});
  grpc::ByteBuffer request(&empty, 1);  // a default ByteBuffer is not a message
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                 &response, [&](grpc::Status s) { done.set_value(s); });
  grpc::Status status = done.get_future().get();
  if (!status.ok()) return -static_cast<int>(status.error_code());
  std::vector<grpc::Slice> slices;
  response.Dump(&slices);
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (bytes.size() == 2 && bytes[0] == 0x08) return bytes[1];
  return 0;
}

TEST(DrainTest, InFlightCallFinishesNewCallsAreRefused) {
  auto daemon = testing::DaemonProcess::Start();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto channel = grpc::CreateChannel((*daemon)->address(), grpc::InsecureChannelCredentials());
  EXPECT_EQ(HealthStatus(channel), 1);

  // A long-lived call: an upload that has sent its header and half its bytes.
  auto tensors = v1::TensorService::NewStub(channel);
  grpc::ClientContext upload_context;
  v1::UploadResponse upload_response;
  auto writer = tensors->Upload(&upload_context, &upload_response);
  v1::UploadRequest header;
  header.mutable_header()->set_dtype(v1::DTYPE_F32);
  header.mutable_header()->add_shape(256);
  header.mutable_header()->set_name("in-flight");
  ASSERT_TRUE(writer->Write(header));
  v1::UploadRequest chunk;
  chunk.set_chunk(std::string(512, '\x01'));
  ASSERT_TRUE(writer->Write(chunk));

  // Wait (bounded) until the daemon counts the upload as open -- a round
  // trip on another call does not order it after the upload's start -- then
  // ask it to stop.
  auto daemon_service = v1::DaemonService::NewStub(channel);
  int64_t open_streams = 0;
  for (int i = 0; i < 400 && open_streams < 1; ++i) {
    grpc::ClientContext context;
    v1::GetStatusResponse status;
    ASSERT_TRUE(daemon_service->GetStatus(&context, {}, &status).ok());
    open_streams = status.num_open_streams();
    if (open_streams < 1) absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_EQ(open_streams, 1);
  auto devices = v1::DeviceService::NewStub(channel);
  ASSERT_EQ(kill((*daemon)->pid(), SIGTERM), 0);

  // Bounded wait for the drain to start: health turns NOT_SERVING.
  int health = 1;
  for (int i = 0; i < 200 && health == 1; ++i) {
    health = HealthStatus(channel);
    if (health == 1) absl::SleepFor(absl::Milliseconds(25));
  }
  EXPECT_EQ(health, 2);
  {
    grpc::ClientContext context;
    v1::ListDevicesResponse response;
    grpc::Status status = devices->ListDevices(&context, {}, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(status.error_message(), HasSubstr("draining"));
  }

  // The in-flight upload completes normally.
  ASSERT_TRUE(writer->Write(chunk));
  ASSERT_TRUE(writer->WritesDone());
  grpc::Status upload_status = writer->Finish();
  EXPECT_TRUE(upload_status.ok()) << upload_status.error_message();
  EXPECT_EQ(upload_response.tensor().shape(0), 256);

  EXPECT_EQ((*daemon)->Stop(SIGTERM, absl::Seconds(30)), 0);
  EXPECT_THAT((*daemon)->Stderr(), HasSubstr("drained; stopped serving"));
}

}  // namespace
}  // namespace placement
