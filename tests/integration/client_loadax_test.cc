// The cluster-facing parts of the client against one real placementd with 8
// CPU devices: loadax's host_to_global_device_array / global_to_host_array
// (loadax.h), multi-controller collectives (a lone daemon is a one-process
// cluster: a kMulti call runs at once, with kSingle's result), and the
// ProcessLocal checks made before any byte moves. Clusters of several
// daemons: tests/cluster/placectl_cluster_test.cc.
#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/client_daemon_fixture.h"

namespace placement::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
std::vector<uint8_t> BytesOf(const std::vector<T>& values) {
  absl::Span<const uint8_t> bytes = AsBytes(absl::MakeConstSpan(values));
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

template <typename T>
std::vector<T> Iota(size_t n) {
  std::vector<T> out(n);
  std::iota(out.begin(), out.end(), T{0});
  return out;
}

class ClientLoadaxTest : public ClientDaemonTest {};

TEST_F(ClientLoadaxTest, FullPartitionRoundTrip) {
  auto mesh = meshes_->Create({{"data", 4}, {"model", 2}});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::vector<float> x = Iota<float>(16 * 3);
  std::vector<int32_t> y = Iota<int32_t>(16);
  HostTree host = {{"x", HostArray::Of(x, {16, 3})}, {"y", HostArray::Of(y, {16})}};
  auto batch = host_to_global_device_array(*client_, host, *mesh);
  ASSERT_TRUE(batch.ok()) << batch.status();
  // One process: the global shape is the host shape; dimension 0 over all 8 devices.
  const TensorInfo& xi = batch->at("x").info();
  EXPECT_THAT(xi.shape, ElementsAre(16, 3));
  ASSERT_EQ(xi.shards.size(), 8u);
  EXPECT_EQ(xi.shards[1].ranges[0], (IndexRange{2, 4}));
  EXPECT_EQ(xi.shards[1].process_index, 0);

  auto back = global_to_host_array(*client_, *batch);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(back->at("x").header.shape, ElementsAre(16, 3));
  EXPECT_EQ(back->at("x").header.dtype, DType::kF32);
  EXPECT_EQ(back->at("x").bytes, BytesOf(x));
  EXPECT_EQ(back->at("y").bytes, BytesOf(y));

  // Handles that carry only an id are described first.
  auto by_id = global_to_host_array(*client_, TensorTree{{"x", batch->at("x").id()}});
  ASSERT_TRUE(by_id.ok()) << by_id.status();
  EXPECT_EQ(by_id->at("x").bytes, BytesOf(x));

  // The downloaded tree uploads again as host arrays.
  auto again = host_to_global_device_array(*client_, AsHostTree(*back), mesh->id,
                                           DataPartition::kReplicated);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->at("y").info().shards.size(), 8u);
  EXPECT_EQ(again->at("y").info().shards[7].ranges[0], (IndexRange{0, 16}));
}

TEST_F(ClientLoadaxTest, ReplicatedPartitionReturnsTheFirstLocalShard) {
  auto mesh = meshes_->CreateDataParallel();
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::vector<float> w = Iota<float>(4 * 2);
  auto placed = host_to_global_device_array(*client_, {{"w", HostArray::Of(w, {4, 2})}}, *mesh,
                                            DataPartition::kReplicated);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_THAT(placed->at("w").info().shape, ElementsAre(4, 2));
  auto back = global_to_host_array(*client_, *placed, DataPartition::kReplicated);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(back->at("w").header.shape, ElementsAre(4, 2));
  EXPECT_EQ(back->at("w").bytes, BytesOf(w));
}

TEST_F(ClientLoadaxTest, LoadaxErrors) {
  auto mesh = meshes_->CreateDataParallel();
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::vector<float> ten(10 * 3);
  auto indivisible =
      host_to_global_device_array(*client_, {{"x", HostArray::Of(ten, {10, 3})}}, *mesh);
  EXPECT_EQ(indivisible.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(indivisible.status().message(),
              HasSubstr("([10,3]) cannot be sharded across 8 devices."));

  const auto bogus = static_cast<DataPartition>(7);
  EXPECT_EQ(host_to_global_device_array(*client_, {}, *mesh, bogus).status().message(),
            "Unsupported partition: 7");
  EXPECT_EQ(global_to_host_array(*client_, {}, bogus).status().message(),
            "Unsupported partition: 7");

  std::vector<float> a(8), b(16), s(1);
  auto batch = host_to_global_device_array(
      *client_, {{"a", HostArray::Of(a, {8})}, {"b", HostArray::Of(b, {16})}}, *mesh);
  ASSERT_TRUE(batch.ok()) << batch.status();
  auto mismatch = global_to_host_array(*client_, *batch);
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(mismatch.status().message(),
            "global_to_host_array: batch size mismatch: 'b' has 16 rows, 'a' has 8");
  auto scalar = host_to_global_device_array(*client_, {{"s", HostArray::Of(s, {})}}, *mesh,
                                            DataPartition::kReplicated);
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_THAT(global_to_host_array(*client_, *scalar).status().message(),
              HasSubstr("'s' is a scalar; FULL partition needs a batch dimension"));
  EXPECT_TRUE(global_to_host_array(*client_, *scalar, DataPartition::kReplicated).ok());

  EXPECT_EQ(global_to_host_array(*client_, {{"x", "t-nope"}}).status().code(),
            absl::StatusCode::kNotFound);
  auto empty = global_to_host_array(*client_, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST_F(ClientLoadaxTest, MultiControllerCollectivesOnALoneDaemon) {
  auto mesh = meshes_->CreateDataParallel();
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::vector<float> g = Iota<float>(8 * 3);
  auto grads = tensors_->Upload(HostArray::Of(g, {8, 3}), Placement::Sharded(*mesh, {{"data"}}));
  ASSERT_TRUE(grads.ok()) << grads.status();

  CollectiveClient collectives(*client_);
  CollectiveOptions single;
  CollectiveOptions multi;
  multi.controller = Controller::kMulti;
  auto s = collectives.AllReduce(grads->id, ReduceOp::kSum, single);
  auto m = collectives.AllReduce(grads->id, ReduceOp::kSum, multi);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->shape, s->shape);
  auto sb = tensors_->DownloadBytes(s->id);
  auto mb = tensors_->DownloadBytes(m->id);
  ASSERT_TRUE(sb.ok() && mb.ok());
  EXPECT_EQ(mb->bytes, sb->bytes);

  DataParallel dp(*client_, Controller::kMulti);
  EXPECT_EQ(dp.controller(), Controller::kMulti);
  EXPECT_EQ(DataParallel(*client_).controller(), Controller::kSingle);
  auto reduced = dp.all_reduce_gradients({{"g", *grads}}, "sum", "data");
  ASSERT_TRUE(reduced.ok()) << reduced.status();
  auto rb = tensors_->DownloadBytes(reduced->at("g").id());
  ASSERT_TRUE(rb.ok()) << rb.status();
  EXPECT_EQ(rb->bytes, sb->bytes);
  auto gathered = collectives.AllGather(grads->id, 0, multi);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  EXPECT_THAT(gathered->shape, ElementsAre(8, 3));
}

TEST_F(ClientLoadaxTest, ProcessLocalOptionsAreCheckedBeforeAnyByte) {
  auto mesh = meshes_->CreateDataParallel();
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::vector<float> x(8 * 1024, 1.0f);  // 32 KiB
  const Rule rule = Placement::Sharded(*mesh, {{"data"}});
  UploadOptions options;
  options.process_local = ProcessLocal{};  // no global_name
  for (TransferPath path : {TransferPath::kAuto, TransferPath::kStream}) {
    options.path = path;
    EXPECT_THAT(tensors_->Upload(HostArray::Of(x, {8, 1024}), rule, options).status().message(),
                HasSubstr("process_local.global_name must not be empty"));
    int reads = 0;
    auto from = tensors_->UploadFrom(
        DType::kF32, {8, 1024},
        [&](absl::Span<uint8_t>) -> absl::StatusOr<size_t> {
          ++reads;
          return 0;
        },
        rule, options);
    EXPECT_EQ(from.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(reads, 0);
    EXPECT_EQ(tensors_->StartUpload(DType::kF32, {8, 1024}, rule, options).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(
        tensors_->UploadBatch({{"x", HostArray::Of(x, {8, 1024})}}, rule, options).status().code(),
        absl::StatusCode::kInvalidArgument);
  }
  options.process_local = ProcessLocal{.global_name = "g"};
  options.name = "w";
  EXPECT_THAT(tensors_->Upload(HostArray::Of(x, {8, 1024}), rule, options).status().message(),
              HasSubstr("name 'w' and process_local are both set"));
  EXPECT_EQ(host_to_global_device_array(*client_, {{"x", HostArray::Of(x, {8, 1024})}}, *mesh,
                                        DataPartition::kFull, ProcessLocal{"g", {-1, 1024}})
                .status()
                .message(),
            "process_local.global_shape[0] is -1; must be >= 0");
  auto list = tensors_->List();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

}  // namespace
}  // namespace placement::client
