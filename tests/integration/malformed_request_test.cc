// Request bytes that do not parse as the method's request message answer
// INVALID_ARGUMENT "malformed request: ..." (gRPC's own answer would be
// UNIMPLEMENTED with no message), on unary and server-streaming methods; in
// an upload stream, a message that does not parse fails the upload -- even
// after its last chunk, where gRPC reported it like the end of the stream
// and the upload was committed.
#include <signal.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/v1/collective_service.pb.h"
#include "placement/v1/tensor_service.pb.h"
#include "tests/testing/daemon_process.h"

namespace placement {
namespace {

using testing::DaemonProcess;
using ::testing::HasSubstr;

// One unary call of `method` with `bytes` as the serialized request.
grpc::Status CallWithBytes(grpc::GenericStub& stub, const std::string& method,
                           const std::string& bytes) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&context, method, {}, &request, &response, [&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = std::move(s);
    done = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  return status;
}

TEST(MalformedRequestTest, UnparsableBytesAreInvalidArgument) {
  auto daemon = DaemonProcess::Start({.extra_flags = {"--backend=cpu", "--cpu_devices=1"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  grpc::GenericStub stub(
      grpc::CreateChannel((*daemon)->address(), grpc::InsecureChannelCredentials()));
  // 0xff 0xff ...: a field tag with an unterminated varint.
  const std::string garbage(8, '\xff');
  for (const char* method :
       {"/placement.v1.TensorService/Describe", "/placement.v1.DeviceService/ListDevices",
        "/placement.v1.MeshService/CreateMesh", "/placement.v1.TensorService/Download",
        // Collectives parse into a per-call arena (server/service/arena_messages.h).
        "/placement.v1.CollectiveService/AllReduce",
        "/placement.v1.CollectiveService/AllReduceBatch"}) {
    grpc::Status status = CallWithBytes(stub, method, garbage);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_THAT(status.error_message(), HasSubstr("malformed request: the request bytes do not "
                                                  "parse as the request message of "))
        << method;
  }
  // Unknown methods stay UNIMPLEMENTED.
  EXPECT_EQ(CallWithBytes(stub, "/placement.v1.TensorService/Nope", "").error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  // Well-formed bytes still work (an empty ListDevicesRequest).
  EXPECT_TRUE(CallWithBytes(stub, "/placement.v1.DeviceService/ListDevices", "").ok());
  // A collective request past the arena's inline 4 KiB parses whole: its
  // first unknown id is the answer.
  v1::AllReduceBatchRequest batch;
  for (int i = 0; i < 2000; ++i) batch.add_tensor_ids(absl::StrCat("t-unknown-", i));
  ASSERT_GT(batch.ByteSizeLong(), 4096u);
  grpc::Status unknown = CallWithBytes(stub, "/placement.v1.CollectiveService/AllReduceBatch",
                                       batch.SerializeAsString());
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND) << unknown.error_message();
  EXPECT_THAT(unknown.error_message(), HasSubstr("t-unknown-0"));
  EXPECT_EQ((*daemon)->Stop(SIGTERM), 0);
}

// One Upload-like client stream of `messages` (serialized bytes each), then
// half-close; the final status.
grpc::Status StreamWithBytes(grpc::GenericStub& stub, const std::string& method,
                             const std::vector<std::string>& messages) {
  grpc::CompletionQueue cq;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto wait = [&cq] {
    void* tag = nullptr;
    bool ok = false;
    cq.Next(&tag, &ok);
    return ok;
  };
  auto call = stub.PrepareCall(&context, method, &cq);
  call->StartCall(reinterpret_cast<void*>(1));
  bool ok = wait();
  for (const std::string& bytes : messages) {
    if (!ok) break;
    grpc::Slice slice(bytes);
    grpc::ByteBuffer message(&slice, 1);
    call->Write(message, reinterpret_cast<void*>(2));
    ok = wait();
  }
  if (ok) {
    call->WritesDone(reinterpret_cast<void*>(3));
    wait();
  }
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(4));
  wait();
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  wait();
  cq.Shutdown();
  void* tag = nullptr;
  bool more = false;
  while (cq.Next(&tag, &more)) {
  }
  return status;
}

TEST(MalformedRequestTest, AnUnparsableMessageFailsAnUploadEvenAfterItsLastChunk) {
  auto daemon = DaemonProcess::Start({.extra_flags = {"--backend=cpu", "--cpu_devices=1"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto client = (*daemon)->Connect();
  ASSERT_TRUE(client.ok());
  grpc::GenericStub stub(
      grpc::CreateChannel((*daemon)->address(), grpc::InsecureChannelCredentials()));
  v1::UploadRequest header;
  header.mutable_header()->set_dtype(v1::DTYPE_U8);
  header.mutable_header()->add_shape(16);
  v1::UploadRequest chunk;
  chunk.set_chunk(std::string(16, 'x'));
  const std::string garbage(8, '\xff');
  // Complete, then garbage: before, the garbage read like a half-close and
  // the tensor was committed; now the upload fails and keeps nothing.
  grpc::Status status =
      StreamWithBytes(stub, "/placement.v1.TensorService/Upload",
                      {header.SerializeAsString(), chunk.SerializeAsString(), garbage});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "message 3 of the stream does not parse as placement.v1.UploadRequest; the upload is "
            "abandoned");
  auto status_after = (*client)->GetStatus();
  ASSERT_TRUE(status_after.ok());
  EXPECT_EQ(status_after->num_tensors, 0);
  EXPECT_EQ(status_after->device_bytes_in_use, 0);
  // The same in a batch upload, and a well-formed upload still commits.
  status = StreamWithBytes(stub, "/placement.v1.TensorService/UploadBatch", {garbage});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("placement.v1.UploadBatchRequest"));
  status = StreamWithBytes(stub, "/placement.v1.TensorService/Upload",
                           {header.SerializeAsString(), chunk.SerializeAsString()});
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ((*client)->GetStatus()->num_tensors, 1);
  EXPECT_EQ((*daemon)->Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace placement
