// Nothing stays committed that the caller did not get: Place and collectives
// whose callers give up (a deadline far shorter than the work) leave no
// result behind -- the tensor count and device memory return to what the
// caller knows about.
#include <signal.h>

#include <string>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/v1/collective_service.grpc.pb.h"
#include "placement/v1/device_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"
#include "tests/testing/daemon_process.h"

namespace placement {
namespace {

namespace pb = placement::v1;
using testing::DaemonProcess;

constexpr int64_t kElements = 4 << 20;  // f32: 16 MiB per replica

class UncommittedResultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = DaemonProcess::Start({.extra_flags = {"--backend=cpu", "--cpu_devices=4"}});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto channel = grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials());
    tensors_ = pb::TensorService::NewStub(channel);
    collectives_ = pb::CollectiveService::NewStub(channel);
    devices_ = pb::DeviceService::NewStub(channel);
    baseline_ = MemoryInUse();
  }

  // f32[kElements] replicated on every device.
  std::string UploadReplicated() {
    grpc::ClientContext context;
    pb::UploadResponse response;
    auto writer = tensors_->Upload(&context, &response);
    pb::UploadRequest header;
    header.mutable_header()->set_dtype(pb::DTYPE_F32);
    header.mutable_header()->add_shape(kElements);
    header.mutable_header()->mutable_rule()->mutable_replicate();
    writer->Write(header);
    const std::string chunk(1 << 20, '\0');
    for (int64_t sent = 0; sent < kElements * 4; sent += chunk.size()) {
      pb::UploadRequest request;
      request.set_chunk(chunk);
      writer->Write(request);
    }
    writer->WritesDone();
    EXPECT_TRUE(writer->Finish().ok());
    return response.tensor().id();
  }
  int64_t MemoryInUse() {
    grpc::ClientContext context;
    pb::ListDevicesResponse response;
    EXPECT_TRUE(devices_->ListDevices(&context, {}, &response).ok());
    int64_t total = 0;
    for (const auto& d : response.devices()) total += d.memory_in_use_bytes();
    return total;
  }
  int TensorCount() {
    grpc::ClientContext context;
    pb::ListTensorsResponse response;
    EXPECT_TRUE(tensors_->List(&context, {}, &response).ok());
    return response.tensors_size();
  }
  // Waits (bounded far above the work) until only `expected` tensors exist
  // and device memory is `memory` (an operation still running holds memory
  // before it commits; a kept result would hold it for ever).
  bool SettlesAt(int expected, int64_t memory) {
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (TensorCount() != expected || MemoryInUse() != memory) {
      if (absl::Now() > give_up) return false;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return true;
  }
  static void ShortDeadline(grpc::ClientContext* context) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::microseconds(500));
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<pb::TensorService::Stub> tensors_;
  std::unique_ptr<pb::CollectiveService::Stub> collectives_;
  std::unique_ptr<pb::DeviceService::Stub> devices_;
  int64_t baseline_ = 0;
};

TEST_F(UncommittedResultsTest, PlaceWhoseCallerGaveUpLeavesNothing) {
  const std::string source = UploadReplicated();
  const int64_t with_source = MemoryInUse();
  for (int attempt = 0; attempt < 6; ++attempt) {
    grpc::ClientContext context;
    ShortDeadline(&context);
    pb::PlaceRequest request;
    request.add_tensor_ids(source);
    request.mutable_rule()->mutable_placement()->set_device_id(attempt % 4);
    pb::PlaceResponse response;
    grpc::Status status = tensors_->Place(&context, request, &response);
    if (status.ok()) {  // the daemon beat the deadline: the caller has the result
      grpc::ClientContext del;
      pb::DeleteTensorsRequest d;
      d.add_tensor_ids(response.tensors(0).id());
      pb::DeleteTensorsResponse r;
      ASSERT_TRUE(tensors_->Delete(&del, d, &r).ok());
    }
    EXPECT_TRUE(SettlesAt(1, with_source))
        << "attempt " << attempt << ": " << status.error_message();
  }
  EXPECT_EQ(MemoryInUse(), with_source);
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

TEST_F(UncommittedResultsTest, CollectiveWhoseCallerGaveUpLeavesNothing) {
  const std::string source = UploadReplicated();
  const int64_t with_source = MemoryInUse();
  for (int attempt = 0; attempt < 6; ++attempt) {
    grpc::ClientContext context;
    ShortDeadline(&context);
    pb::AllReduceRequest request;
    request.set_tensor_id(source);
    request.set_op_name("sum");
    pb::CollectiveResponse response;
    grpc::Status status = collectives_->AllReduce(&context, request, &response);
    if (status.ok()) {
      grpc::ClientContext del;
      pb::DeleteTensorsRequest d;
      d.add_tensor_ids(response.tensor().id());
      pb::DeleteTensorsResponse r;
      ASSERT_TRUE(tensors_->Delete(&del, d, &r).ok());
    }
    EXPECT_TRUE(SettlesAt(1, with_source))
        << "attempt " << attempt << ": " << status.error_message();
  }
  EXPECT_EQ(MemoryInUse(), with_source);
  EXPECT_GT(with_source, baseline_);
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace placement
