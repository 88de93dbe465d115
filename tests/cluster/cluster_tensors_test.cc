// Tensors whose shards span daemons, single-controller, against real
// daemons on loopback (2 x 4 and 4 x 2 devices): uploads and downloads
// through any daemon for every dtype, one id and the same record on every
// daemon (Describe names each shard's process), reshards between layouts
// that move bytes across daemons, assemble / disassemble, donation, deletes
// freeing every daemon's memory, and the errors a client sees.
#include <unistd.h>

#include <cstring>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/meshes.h"
#include "placement/client/tensors.h"
#include "placement/v1/tensor_service.grpc.pb.h"
#include "tests/cluster/cluster_test_util.h"

namespace placement::testing {
namespace {

using client::DownloadSelection;
using client::HostArray;
using client::Placement;
using client::SourceHandling;
using client::TensorClient;
using ::testing::HasSubstr;

class ClusterTensorsTest : public ::testing::TestWithParam<ClusterLayout>,
                           protected ClusterFixture {
 protected:
  void SetUp() override { StartCluster(GetParam()); }
  void TearDown() override { ExpectMemoryAtBaseline(); }

  static std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> out(n);
    for (auto& b : out) b = static_cast<uint8_t>(rng());
    return out;
  }
};

TEST_P(ClusterTensorsTest, EveryDtypeRoundTripsThroughAnyDaemon) {
  const std::vector<client::DType> dtypes = {
      client::DType::kF32, client::DType::kF64, client::DType::kF16, client::DType::kBF16,
      client::DType::kI8,  client::DType::kI16, client::DType::kI32, client::DType::kI64,
      client::DType::kU8,  client::DType::kBool};
  for (size_t k = 0; k < dtypes.size(); ++k) {
    const int up = static_cast<int>(k) % cluster_->size();
    const int down = (up + 1) % cluster_->size();
    const std::vector<int64_t> shape = {static_cast<int64_t>(n_) * 3, 5};
    auto size = client::ExpectedBytes(dtypes[k], shape);
    ASSERT_TRUE(size.ok());
    std::vector<uint8_t> bytes = RandomBytes(*size, k);
    if (dtypes[k] == client::DType::kBool) {
      for (auto& b : bytes) b &= 1;
    }
    // Sharded on rows over every daemon, and sharded on rows x replicated
    // over the grid's local axis.
    for (const Placement& placement :
         {Placement::Sharded("flat", {{"data"}}), Placement::Sharded("grid", {{"proc"}}),
          Placement::Replicated("grid")}) {
      auto info = tensors_[up]->Upload(HostArray{dtypes[k], shape, bytes}, placement);
      ASSERT_TRUE(info.ok()) << info.status();
      auto back = tensors_[down]->DownloadBytes(info->id);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->bytes, bytes) << client::DTypeName(dtypes[k]);
      ASSERT_TRUE(tensors_[down]->Delete({info->id}).ok());
    }
  }
}

TEST_P(ClusterTensorsTest, OneRecordOnEveryDaemonWithEachShardsProcess) {
  std::vector<float> values(n_ * 2 * 3);
  std::iota(values.begin(), values.end(), 0.f);
  auto info = tensors_[0]->Upload(HostArray::Of(values, {n_ * 2, 3}),
                                  Placement::Sharded("flat", {{"data"}}), {.name = "rows"});
  ASSERT_TRUE(info.ok()) << info.status();
  for (int p = 0; p < cluster_->size(); ++p) {
    auto seen = tensors_[p]->Describe(info->id);
    ASSERT_TRUE(seen.ok()) << "daemon " << p << ": " << seen.status();
    EXPECT_EQ(seen->name, "rows");
    ASSERT_EQ(seen->shards.size(), static_cast<size_t>(n_));
    for (const auto& shard : seen->shards) {
      EXPECT_EQ(shard.process_index, shard.device_id / GetParam().devices);
    }
    auto listed = tensors_[p]->List("rows");
    ASSERT_TRUE(listed.ok());
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ(listed->front().id, info->id);
  }
  // global_to_host_array: each daemon's own rows.
  for (int p = 0; p < cluster_->size(); ++p) {
    std::vector<float> rows(GetParam().devices * 2 * 3);
    auto header = tensors_[p]->Download(info->id, client::AsWritableBytes(rows),
                                        DownloadSelection::Process(p));
    ASSERT_TRUE(header.ok()) << header.status();
    EXPECT_EQ(header->shape, (std::vector<int64_t>{GetParam().devices * 2, 3}));
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(rows[i], values[p * rows.size() + i]);
    }
  }
  // Deleted through one daemon: gone everywhere.
  ASSERT_TRUE(tensors_.back()->Delete({info->id}).ok());
  for (int p = 0; p < cluster_->size(); ++p) {
    EXPECT_EQ(tensors_[p]->Describe(info->id).status().code(), absl::StatusCode::kNotFound);
  }
}

TEST_P(ClusterTensorsTest, ReshardsMoveOnlyTheNeededBoxesAcrossDaemons) {
  const int64_t rows = n_ * 2, cols = n_;
  std::vector<int32_t> values(rows * cols);
  std::iota(values.begin(), values.end(), 0);
  auto src = tensors_[0]->Upload(HostArray::Of(values, {rows, cols}),
                                 Placement::Sharded("flat", {{"data"}}));
  ASSERT_TRUE(src.ok()) << src.status();
  const std::vector<Placement> targets = {
      Placement::Sharded("flat", {{}, {"data"}}),         // rows -> columns
      Placement::Sharded("grid", {{"local"}, {"proc"}}),  // a 2-D layout
      Placement::Replicated("grid"),                      // everywhere
      Placement::Device(n_ - 1),                          // the last daemon's last device
      Placement::Sharded("grid", {{"proc", "local"}}),    // rows again, other order
  };
  for (size_t t = 0; t < targets.size(); ++t) {
    const int driver = static_cast<int>(t) % cluster_->size();
    auto placed = tensors_[driver]->Place(src->id, targets[t]);
    ASSERT_TRUE(placed.ok()) << "target " << t << ": " << placed.status();
    std::vector<int32_t> back(values.size());
    auto header = tensors_[(driver + 1) % cluster_->size()]->Download(
        placed->id, client::AsWritableBytes(back));
    ASSERT_TRUE(header.ok()) << header.status();
    EXPECT_EQ(back, values) << "target " << t;
    ASSERT_TRUE(tensors_[0]->Delete({placed->id}).ok());
  }
  // Donation: the source is gone everywhere afterwards.
  auto moved =
      tensors_[1]->Place({src->id}, Placement::Replicated("flat"), SourceHandling::kDonate);
  ASSERT_TRUE(moved.ok()) << moved.status();
  for (int p = 0; p < cluster_->size(); ++p) {
    EXPECT_EQ(tensors_[p]->Describe(src->id).status().code(), absl::StatusCode::kNotFound);
  }
}

TEST_P(ClusterTensorsTest, AssembleAndDisassembleAcrossDaemons) {
  // One single-device piece per device, uploaded through daemon 0.
  std::vector<std::string> pieces;
  for (int d = 0; d < n_; ++d) {
    std::vector<float> piece = {d * 10.f, d * 10.f + 1, d * 10.f + 2};
    auto info = tensors_[0]->Upload(HostArray::Of(piece, {1, 3}), Placement::Device(d));
    ASSERT_TRUE(info.ok()) << info.status();
    pieces.push_back(info->id);
  }
  auto whole = tensors_[1]->Assemble({n_, 3}, Placement::Sharded("flat", {{"data"}}), pieces,
                                     SourceHandling::kDonate);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (const std::string& piece : pieces) {
    EXPECT_EQ(tensors_[0]->Describe(piece).status().code(), absl::StatusCode::kNotFound);
  }
  std::vector<float> back(n_ * 3);
  ASSERT_TRUE(tensors_.back()->Download(whole->id, client::AsWritableBytes(back)).ok());
  for (int d = 0; d < n_; ++d) EXPECT_EQ(back[d * 3 + 1], d * 10.f + 1);

  auto split = tensors_.back()->Disassemble(whole->id);
  ASSERT_TRUE(split.ok()) << split.status();
  ASSERT_EQ(split->size(), static_cast<size_t>(n_));
  for (int d = 0; d < n_; ++d) {
    EXPECT_EQ((*split)[d].shards.front().device_id, d);
    std::vector<float> piece(3);
    ASSERT_TRUE(tensors_[0]->Download((*split)[d].id, client::AsWritableBytes(piece)).ok());
    EXPECT_EQ(piece[2], d * 10.f + 2);
  }
}

// A donating Disassemble / Assemble whose part fails on one daemon (its
// tensor in use there: a download holds it) after the others took theirs
// consumes its sources everywhere, as a failed donating collective does;
// before, they were gone on the daemons that took them and left on the one
// that failed. A refused request (checked before any daemon takes
// anything) and one whose every part failed (each takes all or none) keep
// them all.
TEST_P(ClusterTensorsTest, AFailedDonationConsumesItsSourcesEverywhere) {
  // 16 MiB per device: more than a stalled download's transport buffers,
  // so the download holds its tensor until it is cancelled.
  const int64_t cols = int64_t{4} << 20;
  const int last = cluster_->size() - 1;
  // Holds `id` on daemon `p` with a download that reads its header only.
  struct Held {
    grpc::ClientContext context;
    std::unique_ptr<v1::TensorService::Stub> stub;
    std::unique_ptr<grpc::ClientReader<v1::DownloadResponse>> reader;
  };
  auto hold = [&](int p, const std::string& id) {
    auto held = std::make_unique<Held>();
    held->stub = v1::TensorService::NewStub(
        grpc::CreateChannel(cluster_->address(p), grpc::InsecureChannelCredentials()));
    v1::DownloadRequest request;
    request.set_tensor_id(id);
    request.set_chunk_size_bytes(64 << 10);
    // Its own shards only: a whole download would hold the tensor on the
    // daemons it reads the other shards from, too.
    request.set_process_index(p);
    held->reader = held->stub->Download(&held->context, request);
    v1::DownloadResponse header;
    EXPECT_TRUE(held->reader->Read(&header));
    return held;
  };
  auto release = [](std::unique_ptr<Held> held) {
    held->context.TryCancel();
    held->reader->Finish().IgnoreError();
  };
  auto gone_everywhere = [&](const std::string& id) {
    for (int p = 0; p < cluster_->size(); ++p) {
      EXPECT_EQ(tensors_[p]->Describe(id).status().code(), absl::StatusCode::kNotFound)
          << "tensor " << id << " is still listed on daemon " << p;
    }
  };

  std::vector<float> rows(n_ * cols, 1.f);
  auto whole =
      tensors_[0]->Upload(HostArray::Of(rows, {n_, cols}), Placement::Sharded("flat", {{"data"}}));
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto held = hold(last, whole->id);
  auto split = tensors_[0]->Disassemble(whole->id, SourceHandling::kDonate);
  EXPECT_EQ(split.status().code(), absl::StatusCode::kFailedPrecondition) << split.status();
  EXPECT_THAT(split.status().message(), HasSubstr("in use"));
  EXPECT_THAT(split.status().message(), HasSubstr("the donated source(s) were consumed"));
  release(std::move(held));
  gone_everywhere(whole->id);

  std::vector<std::string> pieces;
  std::vector<float> row(cols, 2.f);
  for (int d = 0; d < n_; ++d) {
    auto info = tensors_[0]->Upload(HostArray::Of(row, {1, cols}), Placement::Device(d));
    ASSERT_TRUE(info.ok()) << info.status();
    pieces.push_back(info->id);
  }
  // Refused (a shape no piece fits): every piece stays.
  auto refused = tensors_[0]->Assemble({n_, cols * 2}, Placement::Sharded("flat", {{"data"}}),
                                       pieces, SourceHandling::kDonate);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  for (int p = 0; p < cluster_->size(); ++p) {
    for (const std::string& piece : pieces) EXPECT_TRUE(tensors_[p]->Describe(piece).ok());
  }
  held = hold(last, pieces.back());  // the last device's piece, on its daemon
  // Its only part failed: nothing was taken, so the piece stays.
  auto alone = tensors_[0]->Assemble({1, cols}, Placement::Device(n_ - 1), {pieces.back()},
                                     SourceHandling::kDonate);
  EXPECT_EQ(alone.status().code(), absl::StatusCode::kFailedPrecondition) << alone.status();
  EXPECT_THAT(alone.status().message(), ::testing::Not(HasSubstr("consumed")));
  for (int p = 0; p < cluster_->size(); ++p) EXPECT_TRUE(tensors_[p]->Describe(pieces.back()).ok());
  auto assembled = tensors_[0]->Assemble({n_, cols}, Placement::Sharded("flat", {{"data"}}), pieces,
                                         SourceHandling::kDonate);
  EXPECT_EQ(assembled.status().code(), absl::StatusCode::kFailedPrecondition) << assembled.status();
  EXPECT_THAT(assembled.status().message(), HasSubstr("the donated source(s) were consumed"));
  release(std::move(held));
  for (const std::string& piece : pieces) gone_everywhere(piece);
  // The cancelled download lets go of its piece's memory on its own time.
  for (int i = 0; i < 500 && Memory() != baseline_; ++i) absl::SleepFor(absl::Milliseconds(10));
}

TEST_P(ClusterTensorsTest, ErrorsNameTheProblemOnEveryDaemon) {
  std::vector<float> values(n_ + 1);
  auto info = tensors_[0]->Upload(HostArray::Of(values, {n_ + 1}), Placement::Replicated("flat"));
  ASSERT_TRUE(info.ok());
  // Unknown ids: NOT_FOUND from any daemon.
  EXPECT_EQ(tensors_.back()->Describe("t-00000000000000000000000000000000").status().code(),
            absl::StatusCode::kNotFound);
  // An uneven reshard: JAX's divisibility message, and nothing made.
  auto bad = tensors_.back()->Place(info->id, Placement::Sharded("grid", {{"local", "proc"}}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("divisible"));
  // A device budget exceeded on another daemon: RESOURCE_EXHAUSTED, and
  // nothing kept anywhere.
  std::vector<uint8_t> big(int64_t{80} << 20);
  auto huge =
      tensors_[0]->Upload(HostArray{client::DType::kU8, {static_cast<int64_t>(big.size())}, big},
                          Placement::Device(n_ - 1));
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  auto listed = tensors_[1]->List();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Clusters, ClusterTensorsTest,
                         ::testing::Values(ClusterLayout{2, 4}, ClusterLayout{4, 2},
                                           ClusterLayout{2, 4, true}),
                         LayoutName);

}  // namespace
}  // namespace placement::testing
