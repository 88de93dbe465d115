// Collectives across daemons on loopback (2 x 4 and 4 x 2 devices): every
// kind and op against a float64 reference, single-controller (one call on
// any daemon drives the others) and multi-controller (every process's
// "trainer" -- a thread -- calls its own daemon with CONTROLLER_MULTI),
// groups that span daemons and groups inside one, in-place donation,
// concurrent collectives from different daemons, and results recorded on
// every daemon. Device memory returns to its baseline after each test.
#include <unistd.h>

#include <cmath>
#include <functional>
#include <numeric>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/collectives.h"
#include "placement/client/meshes.h"
#include "placement/client/tensors.h"
#include "placement/v1/collective_service.grpc.pb.h"
#include "tests/cluster/cluster_test_util.h"

namespace placement::testing {
namespace {

namespace pb = placement::v1;
using client::CollectiveClient;
using client::HostArray;
using client::Placement;
using client::ReduceOp;
using client::SourceHandling;
using client::TensorClient;
using ::testing::HasSubstr;

class ClusterCollectivesTest : public ::testing::TestWithParam<ClusterLayout>,
                               protected ClusterFixture {
 protected:
  void SetUp() override {
    StartCluster(GetParam(), {"--cluster_op_timeout=20s"});
    for (const auto& c : clients_) {
      collectives_.push_back(std::make_unique<CollectiveClient>(*c));
    }
  }
  void TearDown() override { ExpectMemoryAtBaseline(); }

  // Every process's trainer calls a multi-controller all-reduce of `id`
  // with op_of(p) on its own daemon, all at once.
  void MultiAllReduce(const std::string& id, const std::function<pb::ReduceOp(int)>& op_of,
                      std::vector<grpc::Status>& statuses,
                      std::vector<pb::CollectiveResponse>& responses) {
    statuses.assign(cluster_->size(), grpc::Status());
    responses.assign(cluster_->size(), pb::CollectiveResponse());
    std::vector<std::thread> trainers;
    for (int p = 0; p < cluster_->size(); ++p) {
      trainers.emplace_back([&, p] {
        pb::AllReduceRequest request;
        request.set_tensor_id(id);
        request.set_op(op_of(p));
        request.set_controller(pb::CONTROLLER_MULTI);
        statuses[p] = AllReduceOn(cluster_->address(p), request, &responses[p]);
      });
    }
    for (auto& t : trainers) t.join();
  }

  // A [n_ * rows, cols] f64 tensor sharded on rows over "flat": device d's
  // block is rows [d*rows, (d+1)*rows); value(d, i) for element i of the
  // block.
  std::string Blocks(int64_t rows, int64_t cols, const std::function<double(int, int64_t)>& value,
                     int via = 0) {
    std::vector<double> all(n_ * rows * cols);
    for (int d = 0; d < n_; ++d) {
      for (int64_t i = 0; i < rows * cols; ++i) all[d * rows * cols + i] = value(d, i);
    }
    auto info = tensors_[via]->Upload(HostArray::Of(all, {n_ * rows, cols}),
                                      Placement::Sharded("flat", {{"data"}}));
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->id : "";
  }

  std::vector<double> Doubles(const std::string& id, int via = 0) {
    auto bytes = tensors_[via]->DownloadBytes(id);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    std::vector<double> out(bytes.ok() ? bytes->bytes.size() / 8 : 0);
    if (!out.empty()) std::memcpy(out.data(), bytes->bytes.data(), bytes->bytes.size());
    return out;
  }

  std::vector<std::unique_ptr<CollectiveClient>> collectives_;
};

double Reduce(ReduceOp op, const std::vector<double>& xs) {
  double acc = xs.front();
  for (size_t i = 1; i < xs.size(); ++i) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMean:
        acc += xs[i];
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, xs[i]);
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, xs[i]);
        break;
      case ReduceOp::kProd:
        acc *= xs[i];
        break;
      default:
        break;
    }
  }
  return op == ReduceOp::kMean ? acc / xs.size() : acc;
}

TEST_P(ClusterCollectivesTest, AllReduceEveryOpMatchesAFloat64Reference) {
  auto value = [](int d, int64_t i) { return 1.0 + 0.25 * d + 0.5 * (i % 3) - (d % 2); };
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProd}) {
    const int via = static_cast<int>(op) % cluster_->size();
    const std::string id = Blocks(1, 6, value, via);
    auto result = collectives_[(via + 1) % cluster_->size()]->AllReduce(id, op);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->shape, (std::vector<int64_t>{1, 6}));
    std::vector<double> got = Doubles(result->id, via);
    ASSERT_EQ(got.size(), 6u);
    for (int64_t i = 0; i < 6; ++i) {
      std::vector<double> xs;
      for (int d = 0; d < n_; ++d) xs.push_back(value(d, i));
      EXPECT_NEAR(got[i], Reduce(op, xs), 1e-12) << "op " << static_cast<int>(op) << " i " << i;
    }
  }
}

TEST_P(ClusterCollectivesTest, AllGatherReduceScatterAndBroadcast) {
  // All-gather: every device ends with the whole array.
  const std::string rows = Blocks(2, 3, [](int d, int64_t i) { return d * 100.0 + i; });
  auto gathered = collectives_.back()->AllGather(rows, 0);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  std::vector<double> all = Doubles(gathered->id);
  ASSERT_EQ(all.size(), static_cast<size_t>(n_ * 6));
  for (int d = 0; d < n_; ++d) EXPECT_EQ(all[d * 6 + 5], d * 100.0 + 5);

  // Reduce-scatter of a partial tensor: device d's contribution is d + i.
  std::vector<std::string> pieces;
  const int64_t len = n_ * 2;
  for (int d = 0; d < n_; ++d) {
    std::vector<double> piece(len);
    for (int64_t i = 0; i < len; ++i) piece[i] = d + i;
    auto info =
        tensors_[d % cluster_->size()]->Upload(HostArray::Of(piece, {len}), Placement::Device(d));
    ASSERT_TRUE(info.ok());
    pieces.push_back(info->id);
  }
  auto partial = tensors_[0]->Assemble({len}, Placement::Sharded("flat", {}).WithPartial({"data"}),
                                       pieces, SourceHandling::kDonate);
  ASSERT_TRUE(partial.ok()) << partial.status();
  auto scattered =
      collectives_[1 % cluster_->size()]->ReduceScatter(partial->id, ReduceOp::kSum, 0);
  ASSERT_TRUE(scattered.ok()) << scattered.status();
  std::vector<double> sums = Doubles(scattered->id);
  ASSERT_EQ(sums.size(), static_cast<size_t>(len));
  const double base = n_ * (n_ - 1) / 2.0;
  for (int64_t i = 0; i < len; ++i) EXPECT_EQ(sums[i], base + n_ * i);

  // Broadcast from a device of the last daemon.
  const int64_t root = n_ - 1;
  auto spread = collectives_[0]->Broadcast(rows, root);
  ASSERT_TRUE(spread.ok()) << spread.status();
  std::vector<double> copies = Doubles(spread->id);
  ASSERT_EQ(copies.size(), 6u);
  EXPECT_EQ(copies[4], root * 100.0 + 4);
}

TEST_P(ClusterCollectivesTest, GroupsAcrossAndWithinDaemonsAndBatches) {
  // On the proc x local grid, a reduction over 'proc' pairs devices of
  // different daemons; over 'local' it stays inside each daemon.
  for (const char* axis : {"proc", "local"}) {
    const int64_t blocks = std::string(axis) == "proc" ? GetParam().processes : GetParam().devices;
    std::vector<double> all(blocks * 4);
    std::iota(all.begin(), all.end(), 0.0);
    auto info =
        tensors_[0]->Upload(HostArray::Of(all, {blocks, 4}), Placement::Sharded("grid", {{axis}}));
    ASSERT_TRUE(info.ok()) << info.status();
    auto sum = collectives_[0]->AllReduce(info->id, ReduceOp::kSum, {.axes = {axis}});
    ASSERT_TRUE(sum.ok()) << axis << ": " << sum.status();
    std::vector<double> got = Doubles(sum->id, cluster_->size() - 1);
    ASSERT_EQ(got.size(), 4u);
    for (int64_t i = 0; i < 4; ++i) {
      double expected = 0;
      for (int64_t b = 0; b < blocks; ++b) expected += all[b * 4 + i];
      EXPECT_EQ(got[i], expected) << axis;
    }
    ASSERT_TRUE(tensors_[0]->Delete({sum->id, info->id}).ok());
  }
  // A gradient pytree in one fused call, in place.
  std::vector<std::string> grads;
  for (int k = 0; k < 3; ++k) {
    grads.push_back(Blocks(
        1, k + 1, [k](int d, int64_t i) { return d + k + i; }, k % cluster_->size()));
  }
  auto reduced =
      collectives_.back()->AllReduceBatch(grads, "mean", {.source = SourceHandling::kDonate});
  ASSERT_TRUE(reduced.ok()) << reduced.status();
  ASSERT_EQ(reduced->size(), 3u);
  for (int k = 0; k < 3; ++k) {
    std::vector<double> got = Doubles((*reduced)[k].id);
    for (int64_t i = 0; i <= k; ++i) EXPECT_NEAR(got[i], (n_ - 1) / 2.0 + k + i, 1e-12);
    EXPECT_EQ(tensors_[0]->Describe(grads[k]).status().code(), absl::StatusCode::kNotFound);
  }
}

TEST_P(ClusterCollectivesTest, ConcurrentCollectivesFromDifferentDaemons) {
  std::vector<std::string> inputs;
  for (int p = 0; p < cluster_->size(); ++p) {
    inputs.push_back(Blocks(
        1, 1024, [p](int d, int64_t i) { return p + d + i; }, p));
  }
  std::vector<absl::Status> results(cluster_->size());
  std::vector<std::thread> threads;
  for (int p = 0; p < cluster_->size(); ++p) {
    threads.emplace_back([&, p] {
      for (int round = 0; round < 3 && results[p].ok(); ++round) {
        auto r = collectives_[p]->AllReduce(inputs[p], ReduceOp::kSum);
        results[p] = r.status();
        if (r.ok()) results[p] = tensors_[p]->Delete({r->id}).status();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
}

// Each process's trainer makes the same call on its own daemon.
TEST_P(ClusterCollectivesTest, MultiControllerCallsMeetAndRunOnce) {
  const std::string id = Blocks(1, 5, [](int d, int64_t i) { return 2.0 * d + i; });
  std::vector<pb::CollectiveResponse> responses(cluster_->size());
  std::vector<grpc::Status> statuses(cluster_->size());
  std::vector<std::thread> trainers;
  for (int p = 0; p < cluster_->size(); ++p) {
    trainers.emplace_back([&, p] {
      pb::AllReduceRequest request;
      request.set_tensor_id(id);
      request.set_op(pb::REDUCE_OP_SUM);
      request.set_controller(pb::CONTROLLER_MULTI);
      statuses[p] = AllReduceOn(cluster_->address(p), request, &responses[p]);
    });
  }
  for (auto& t : trainers) t.join();
  for (int p = 0; p < cluster_->size(); ++p) {
    ASSERT_TRUE(statuses[p].ok()) << p << ": " << statuses[p].error_message();
    EXPECT_EQ(responses[p].tensor().id(), responses[0].tensor().id());  // one result
  }
  std::vector<double> got = Doubles(responses[0].tensor().id());
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(got[i], n_ * (n_ - 1) + n_ * i);
}

INSTANTIATE_TEST_SUITE_P(Clusters, ClusterCollectivesTest,
                         ::testing::Values(ClusterLayout{2, 4}, ClusterLayout{4, 2},
                                           ClusterLayout{2, 4, true}),
                         LayoutName);

// With --cluster_check_collectives every multi-controller call is compared
// before it runs: trainers that disagree get INVALID_ARGUMENT naming both
// processes at once (without it they wait out --cluster_op_timeout, as
// NCCL ranks that disagree hang; the engine test covers that).
class CheckedClusterCollectivesTest : public ClusterCollectivesTest {
 protected:
  void SetUp() override {
    StartCluster(GetParam(), {"--cluster_op_timeout=20s", "--cluster_check_collectives"});
  }
};

TEST_P(CheckedClusterCollectivesTest, MultiControllerCallsThatDifferFailAtOnce) {
  const std::string id = Blocks(1, 5, [](int d, int64_t i) { return 2.0 * d + i; });
  std::vector<pb::CollectiveResponse> responses(cluster_->size());
  std::vector<grpc::Status> statuses(cluster_->size());
  for (int round = 0; round < 2; ++round) {
    // Round 0 forms the set (its first call is compared at the
    // coordinator); round 1 is a steady-state call, compared by the check.
    MultiAllReduce(
        id, [round](int p) { return round == 1 && p == 0 ? pb::REDUCE_OP_MAX : pb::REDUCE_OP_SUM; },
        statuses, responses);
    if (round == 0) {
      for (int p = 0; p < cluster_->size(); ++p) {
        ASSERT_TRUE(statuses[p].ok()) << p << ": " << statuses[p].error_message();
      }
      ASSERT_TRUE(tensors_[0]->Delete({responses[0].tensor().id()}).ok());
    }
  }
  for (int p = 0; p < cluster_->size(); ++p) {
    EXPECT_EQ(statuses[p].error_code(), grpc::StatusCode::INVALID_ARGUMENT) << p;
    EXPECT_THAT(statuses[p].error_message(), HasSubstr("asked for different collectives"));
  }
}

INSTANTIATE_TEST_SUITE_P(Clusters, CheckedClusterCollectivesTest,
                         ::testing::Values(ClusterLayout{2, 4}), LayoutName);

// With --cluster_check_collectives=false the steady state runs the
// collective alone: calls still meet, run once and agree with the
// reference, call after call.
class UncheckedClusterCollectivesTest : public ClusterCollectivesTest {
 protected:
  void SetUp() override {
    StartCluster(GetParam(), {"--cluster_op_timeout=20s", "--cluster_check_collectives=false"});
  }
};

TEST_P(UncheckedClusterCollectivesTest, MultiControllerCallsRunCallAfterCall) {
  const std::string id = Blocks(1, 5, [](int d, int64_t i) { return 2.0 * d + i; });
  for (int round = 0; round < 5; ++round) {
    std::vector<pb::CollectiveResponse> responses;
    std::vector<grpc::Status> statuses;
    MultiAllReduce(
        id, [round](int) { return round % 2 == 0 ? pb::REDUCE_OP_SUM : pb::REDUCE_OP_MAX; },
        statuses, responses);
    for (int p = 0; p < cluster_->size(); ++p) {
      ASSERT_TRUE(statuses[p].ok()) << round << " " << p << ": " << statuses[p].error_message();
      EXPECT_EQ(responses[p].tensor().id(), responses[0].tensor().id());
    }
    std::vector<double> got = Doubles(responses[0].tensor().id());
    for (int64_t i = 0; i < 5; ++i) {
      EXPECT_EQ(got[i], round % 2 == 0 ? n_ * (n_ - 1) + n_ * i : 2.0 * (n_ - 1) + i);
    }
    ASSERT_TRUE(tensors_[0]->Delete({responses[0].tensor().id()}).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Clusters, UncheckedClusterCollectivesTest,
                         ::testing::Values(ClusterLayout{2, 4}, ClusterLayout{4, 2}), LayoutName);

// By default (no --cluster_check_collectives) a steady-state multi-
// controller call runs unchecked, as NCCL's do: trainers that disagree (a
// MAX against SUMs) never exchange bytes and wait out --cluster_op_timeout
// (DEADLINE_EXCEEDED, or UNAVAILABLE where another daemon gave up first and
// closed its connections), every one told that the call ran unchecked; the
// next call fails on every daemon, and the one after it runs on the set
// formed again.
class DefaultClusterCollectivesTest : public ClusterCollectivesTest {
 protected:
  void SetUp() override { StartCluster(GetParam(), {"--cluster_op_timeout=3s"}); }
};

TEST_P(DefaultClusterCollectivesTest, CallsThatDifferTimeOutSayingTheyRanUnchecked) {
  const std::string id = Blocks(1, 5, [](int d, int64_t i) { return 2.0 * d + i; });
  const auto sum = [](int) { return pb::REDUCE_OP_SUM; };
  std::vector<pb::CollectiveResponse> responses;
  std::vector<grpc::Status> statuses;
  MultiAllReduce(id, sum, statuses, responses);  // forms the set
  for (int p = 0; p < cluster_->size(); ++p) {
    ASSERT_TRUE(statuses[p].ok()) << p << ": " << statuses[p].error_message();
  }
  ASSERT_TRUE(tensors_[0]->Delete({responses[0].tensor().id()}).ok());
  MultiAllReduce(
      id, [](int p) { return p == 0 ? pb::REDUCE_OP_MAX : pb::REDUCE_OP_SUM; }, statuses,
      responses);
  int timed_out = 0;
  for (int p = 0; p < cluster_->size(); ++p) {
    const grpc::StatusCode code = statuses[p].error_code();
    EXPECT_TRUE(code == grpc::StatusCode::DEADLINE_EXCEEDED ||
                code == grpc::StatusCode::UNAVAILABLE)
        << p << ": " << code << " " << statuses[p].error_message();
    if (code == grpc::StatusCode::DEADLINE_EXCEEDED) ++timed_out;
    EXPECT_THAT(statuses[p].error_message(),
                HasSubstr("of set mc/0,1 ran unchecked: trainers that issue a set's collectives "
                          "in different orders or with different arguments wait like this"));
  }
  EXPECT_GT(timed_out, 0);
  MultiAllReduce(id, sum, statuses, responses);  // told everywhere
  for (int p = 0; p < cluster_->size(); ++p) EXPECT_FALSE(statuses[p].ok()) << p;
  MultiAllReduce(id, sum, statuses, responses);  // the set formed again
  for (int p = 0; p < cluster_->size(); ++p) {
    ASSERT_TRUE(statuses[p].ok()) << p << ": " << statuses[p].error_message();
  }
  std::vector<double> got = Doubles(responses[0].tensor().id());
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(got[i], n_ * (n_ - 1) + n_ * i);
  ASSERT_TRUE(tensors_[0]->Delete({responses[0].tensor().id()}).ok());
}

INSTANTIATE_TEST_SUITE_P(Clusters, DefaultClusterCollectivesTest,
                         ::testing::Values(ClusterLayout{2, 4}), LayoutName);

// Daemons that differ in --cluster_check_collectives would each wait for
// the other's kind of call: the set's formation compares the setting, and
// every call fails INVALID_ARGUMENT naming it until they agree.
class MixedCheckClusterCollectivesTest : public ClusterCollectivesTest {
 protected:
  void SetUp() override {
    StartCluster(GetParam(), {"--cluster_op_timeout=20s"}, /*meshes=*/true,
                 {{"--cluster_check_collectives"}, {}});
  }
};

TEST_P(MixedCheckClusterCollectivesTest, EveryCallFailsNamingTheSetting) {
  const std::string id = Blocks(1, 5, [](int d, int64_t i) { return 2.0 * d + i; });
  for (int round = 0; round < 2; ++round) {
    std::vector<pb::CollectiveResponse> responses;
    std::vector<grpc::Status> statuses;
    MultiAllReduce(
        id, [](int) { return pb::REDUCE_OP_SUM; }, statuses, responses);
    for (int p = 0; p < cluster_->size(); ++p) {
      EXPECT_EQ(statuses[p].error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << round << " " << p << ": " << statuses[p].error_message();
      EXPECT_THAT(statuses[p].error_message(),
                  HasSubstr(absl::StrCat("process ", p, " runs with --cluster_check_collectives=",
                                         p == 0 ? "true" : "false", " and process ", 1 - p)));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Clusters, MixedCheckClusterCollectivesTest,
                         ::testing::Values(ClusterLayout{2, 4}), LayoutName);

}  // namespace
}  // namespace placement::testing
