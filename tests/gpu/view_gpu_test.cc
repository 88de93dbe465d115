// CUDA IPC views on a real GPU (label `gpu`; skips without one;
// docs/api/views.md): a daemon's shard exported as a cudaIpcMemHandle_t is
// read by this process (another process than the daemon) with
// cudaIpcOpenMemHandle; a buffer of this process is imported by the daemon
// (ImportTensor: open, range check, device-to-device copy) and downloads
// byte for byte; an exported block is never cached for reuse. Prints the
// IPC figures against a device-to-device cudaMemcpy of the same bytes.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "client/src/region_fd.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/tensors.h"
#include "placement/v1/view_service.grpc.pb.h"
#include "server/platform/cuda/cuda_backend.h"
#include "tests/testing/daemon_process.h"

namespace placement {
namespace {

namespace pb = placement::v1;
using ::testing::HasSubstr;

class ViewGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!server::CudaDevicesPresent(&reason)) GTEST_SKIP() << "no GPU: " << reason;
  }
};

std::vector<uint8_t> Pattern(int64_t n, int seed) {
  std::vector<uint8_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(i * 7 + seed);
  return out;
}

TEST_F(ViewGpuTest, AnExportedBlockIsAnIpcHandleAndNeverCached) {
  auto backend = server::CudaBackend::Create({});
  ASSERT_TRUE(backend.ok()) << backend.status();
  const int64_t id = (*backend)->Devices()[0].id;
  {
    auto buffer = (*backend)->Allocate(id, 4 << 20);
    ASSERT_TRUE(buffer.ok());
    auto exported = (*backend)->ExportShard(**buffer);
    ASSERT_TRUE(exported.ok()) << exported.status();
    EXPECT_EQ((*exported)->ipc_handle.size(), sizeof(cudaIpcMemHandle_t));
    EXPECT_EQ((*exported)->fd, -1);
  }
  EXPECT_EQ((*backend)->MemoryCached(id), 0);  // freed, not cached
  auto bad = [&] {
    auto buffer = (*backend)->Allocate(id, 16);
    return (*backend)->ImportForUpload("short", 0, 16, **buffer);
  }();
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
}

TEST_F(ViewGpuTest, AnotherProcessReadsAnExportAndImportsItsOwnMemory) {
  auto daemon = testing::DaemonProcess::Start({.extra_flags = {"--backend=cuda"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto client = (*daemon)->Connect();
  ASSERT_TRUE(client.ok());
  client::TensorClient tensors(**client);
  constexpr int64_t kBytes = int64_t{64} << 20;
  const std::vector<uint8_t> data = Pattern(kBytes, 3);
  auto info = tensors.Upload(client::HostArray{client::DType::kU8, {kBytes}, data},
                             client::Placement::Device(0));
  ASSERT_TRUE(info.ok()) << info.status();
  auto stub = pb::ViewService::NewStub(
      grpc::CreateChannel((*daemon)->address(), grpc::InsecureChannelCredentials()));
  auto context = [&] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->AddMetadata("placement-session", (*client)->session_id());
    return c;
  };

  // The reader's CUDA context and buffers exist before the clock starts, as
  // in a trainer; D2D copies are asynchronous to the host, so each timed
  // copy ends at a synchronize.
  void* copy = nullptr;
  void* local = nullptr;
  ASSERT_EQ(cudaMalloc(&copy, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&local, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(local, 0, kBytes), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
  };

  // Export: the handle opens here, and the bytes are the tensor's.
  const auto t0 = Clock::now();
  pb::ExportShardsRequest request;
  request.set_tensor_id(info->id);
  pb::ExportShardsResponse exported;
  ASSERT_TRUE(stub->ExportShards(context().get(), request, &exported).ok());
  ASSERT_EQ(exported.shards_size(), 1);
  const pb::ShardView& shard = exported.shards(0);
  ASSERT_EQ(shard.cuda_ipc_handle().size(), sizeof(cudaIpcMemHandle_t));
  auto fds = client::RedeemViewToken((*client)->GetStatus()->region_socket, exported.fd_token());
  ASSERT_TRUE(fds.ok()) << fds.status();
  EXPECT_TRUE(fds->empty());
  const auto t_exported = Clock::now();
  cudaIpcMemHandle_t handle;
  std::memcpy(&handle, shard.cuda_ipc_handle().data(), sizeof(handle));
  void* mapped = nullptr;
  ASSERT_EQ(cudaIpcOpenMemHandle(&mapped, handle, cudaIpcMemLazyEnablePeerAccess), cudaSuccess);
  const auto t_opened = Clock::now();
  const void* source = static_cast<const char*>(mapped) + shard.offset();
  ASSERT_EQ(cudaMemcpy(copy, source, kBytes, cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto t_read = Clock::now();
  ASSERT_EQ(cudaMemcpy(copy, source, kBytes, cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto t_reread = Clock::now();
  ASSERT_EQ(cudaMemcpy(copy, local, kBytes, cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto t_local = Clock::now();
  ASSERT_EQ(cudaMemcpy(copy, source, kBytes, cudaMemcpyDeviceToDevice), cudaSuccess);
  std::vector<uint8_t> back(kBytes);
  ASSERT_EQ(cudaMemcpy(back.data(), copy, kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, data);
  ASSERT_EQ(cudaIpcCloseMemHandle(mapped), cudaSuccess);
  ASSERT_EQ(cudaFree(local), cudaSuccess);
  const double total = ms(t0, t_read), local_copy = ms(t_reread, t_local);
  std::printf(
      "figure: 64 MiB through a CUDA IPC view: export RPC %.3f ms, cudaIpcOpenMemHandle %.3f ms, "
      "first device read %.3f ms (total %.3f ms); a second read of the mapping %.3f ms; a "
      "device-to-device cudaMemcpy between the reader's own buffers %.3f ms; total / own copy "
      "%.2f, second read / own copy %.2f\n",
      ms(t0, t_exported), ms(t_exported, t_opened), ms(t_opened, t_read), total,
      ms(t_read, t_reread), local_copy, total / local_copy, ms(t_read, t_reread) / local_copy);
  pb::UnexportRequest unexport;
  unexport.set_export_id(exported.export_().export_id());
  pb::UnexportResponse done;
  EXPECT_TRUE(stub->Unexport(context().get(), unexport, &done).ok());

  // Import: this process's buffer becomes a tensor of the daemon.
  const std::vector<uint8_t> mine = Pattern(kBytes, 9);
  ASSERT_EQ(cudaMemcpy(copy, mine.data(), kBytes, cudaMemcpyHostToDevice), cudaSuccess);
  cudaIpcMemHandle_t own;
  ASSERT_EQ(cudaIpcGetMemHandle(&own, copy), cudaSuccess);
  pb::ImportTensorRequest import;
  import.set_dtype(pb::DTYPE_U8);
  import.add_shape(kBytes - 4096);
  import.set_device_id(0);
  import.set_offset(4096);
  import.set_cuda_ipc_handle(std::string(reinterpret_cast<const char*>(&own), sizeof(own)));
  pb::ImportTensorResponse imported;
  grpc::Status status = stub->ImportTensor(context().get(), import, &imported);
  ASSERT_TRUE(status.ok()) << status.error_message();
  auto downloaded = tensors.DownloadBytes(imported.tensor().id());
  ASSERT_TRUE(downloaded.ok()) << downloaded.status();
  EXPECT_TRUE(std::equal(downloaded->bytes.begin(), downloaded->bytes.end(), mine.begin() + 4096));
  // Past the allocation: refused, the daemon's context unharmed.
  import.clear_shape();
  import.add_shape(kBytes);
  status = stub->ImportTensor(context().get(), import, &imported);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::OUT_OF_RANGE) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("past the end of the imported allocation"));
  EXPECT_TRUE(tensors.DownloadBytes(info->id).ok());
  cudaFree(copy);
}

}  // namespace
}  // namespace placement
