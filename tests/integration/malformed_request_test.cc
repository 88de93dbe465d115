// Request bytes that do not parse as the method's request message answer
// INVALID_ARGUMENT "malformed request: ..." (gRPC's own answer would be
// UNIMPLEMENTED with no message), on unary and server-streaming methods.
#include <signal.h>

#include <condition_variable>
#include <mutex>
#include <string>

#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
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
        "/placement.v1.MeshService/CreateMesh", "/placement.v1.TensorService/Download"}) {
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
  EXPECT_EQ((*daemon)->Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace placement
