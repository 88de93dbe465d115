// Multi-controller uploads on real clusters (2 x 4 and 4 x 2 devices)
// against JAX: every case of tests/data/process_local_conformance.txt whose
// device -> process map is a real cluster's (contiguous ranges) is uploaded
// by every process's "trainer" (a thread) to its own daemon with
// header.process_local. The committed tensor's shards are the ones JAX's
// make_array_from_process_local_data makes (the table's boxes for its
// process, common/process_local.h's -- checked against JAX by
// process_local_conformance_test -- for the others), its bytes are the
// global array the local parts were cut from, and the cases JAX refuses
// fail with JAX's message. Also: loadax data_partition rules, a process
// that never arrives (DEADLINE_EXCEEDED naming it) and one that fails its
// part (the others fail at once).
#include <atomic>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/meshes.h"
#include "placement/client/tensors.h"
#include "placement/v1/tensor_service.grpc.pb.h"
#include "tests/cluster/cluster_test_util.h"
#include "tests/common/process_local_cases.h"
#include "tests/testing/trainer_call.h"

#ifndef PLACEMENT_TEST_DATA_DIR
#error "PLACEMENT_TEST_DATA_DIR must name the tests/data directory"
#endif

namespace placement::testing {
namespace {

namespace pb = placement::v1;
using process_local_cases::Case;
using ::testing::HasSubstr;

// The process layout of a case's device -> process map, when it is a real
// cluster's: processes x devices-per-process with contiguous ranges.
std::optional<std::pair<int, int>> ClusterShape(const Case& c) {
  const int n = static_cast<int>(c.process_of.size());
  const int processes = c.process_of.back() + 1;
  if (processes < 2 || n % processes != 0) return std::nullopt;
  for (int d = 0; d < n; ++d) {
    if (c.process_of[d] != d / (n / processes)) return std::nullopt;
  }
  return std::make_pair(processes, n / processes);
}

// Element value of the global array at flat index i.
float ValueAt(int64_t i) { return static_cast<float>(i % 9973) + 0.5f; }

// The local data of `process`: each of its shards' global box placed at its
// local box.
std::vector<float> LocalData(const LocalDataLayout& layout) {
  std::vector<float> local(BoxNumElements(FullBox(layout.local_shape)));
  const Box global_full = FullBox(layout.global_shape);
  for (const ProcessLocalShard& shard : layout.shards) {
    // Walk the shard's elements in row-major order.
    const size_t rank = shard.global_box.size();
    std::vector<int64_t> g(rank), l(rank);
    for (size_t d = 0; d < rank; ++d) {
      g[d] = shard.global_box[d].begin;
      l[d] = shard.local_box[d].begin;
    }
    const int64_t count = BoxNumElements(shard.global_box);
    for (int64_t e = 0; e < count; ++e) {
      int64_t gi = 0, li = 0;
      for (size_t d = 0; d < rank; ++d) {
        gi = gi * layout.global_shape[d] + g[d];
        li = li * layout.local_shape[d] + l[d];
      }
      local[li] = ValueAt(gi);
      for (size_t d = rank; d-- > 0;) {
        ++g[d];
        ++l[d];
        if (g[d] < shard.global_box[d].end) break;
        g[d] = shard.global_box[d].begin;
        l[d] = shard.local_box[d].begin;
      }
    }
  }
  return local;
}

struct UploadResult {
  grpc::Status status;
  pb::UploadResponse response;
};

// Uploads `data` of `local_shape` to daemon `address` as this process's part.
UploadResult UploadPart(const std::string& address, const std::string& mesh_id,
                        const PartitionSpec& spec, const Shape& local_shape,
                        const std::optional<Shape>& global_shape, const std::string& global_name,
                        const std::vector<float>& data, absl::Duration timeout) {
  auto stub =
      pb::TensorService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  PrepareTrainerCall(&context, absl::Seconds(60));
  UploadResult result;
  auto writer = stub->Upload(&context, &result.response);
  pb::UploadRequest header;
  pb::UploadHeader* h = header.mutable_header();
  h->set_dtype(pb::DTYPE_F32);
  for (int64_t d : local_shape) h->add_shape(d);
  pb::Sharding* sharding = h->mutable_rule()->mutable_placement()->mutable_sharding();
  sharding->set_mesh_id(mesh_id);
  for (const auto& axes : spec.dims) {
    pb::DimSharding* dim = sharding->mutable_spec()->add_dims();
    for (const auto& axis : axes) dim->add_axes(axis);
  }
  h->mutable_process_local()->set_global_name(global_name);
  if (global_shape.has_value()) {
    for (int64_t d : *global_shape) h->mutable_process_local()->add_global_shape(d);
  }
  h->mutable_process_local()->mutable_timeout()->set_seconds(absl::ToInt64Seconds(timeout));
  writer->Write(header);
  pb::UploadRequest chunk;
  chunk.set_chunk(std::string(reinterpret_cast<const char*>(data.data()), data.size() * 4));
  writer->Write(chunk);
  writer->WritesDone();
  result.status = writer->Finish();
  return result;
}

class ClusterProcessLocalTest : public ::testing::TestWithParam<std::pair<int, int>> {
 protected:
  void SetUp() override {
    ClusterOptions options;
    options.num_processes = GetParam().first;
    options.devices_per_process = GetParam().second;
    auto cluster = ClusterProcesses::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    auto c = cluster_->Connect(0);
    ASSERT_TRUE(c.ok());
    client_ = *std::move(c);
    for (Case& c : process_local_cases::ParseCases(TestDataDir(PLACEMENT_TEST_DATA_DIR) +
                                                   "/process_local_conformance.txt")) {
      if (ClusterShape(c) == GetParam()) cases_.push_back(std::move(c));
    }
    ASSERT_FALSE(cases_.empty());
  }

  int32_t ProcessOf(int64_t device) const {
    return static_cast<int32_t>(device / GetParam().second);
  }

  std::unique_ptr<ClusterProcesses> cluster_;
  std::unique_ptr<client::Client> client_;
  std::vector<Case> cases_;
};

TEST_P(ClusterProcessLocalTest, LayoutsAndBytesAreJaxs) {
  client::MeshClient meshes(*client_);
  client::TensorClient tensors(*client_);
  auto process_of = [this](int64_t d) { return ProcessOf(d); };
  int checked = 0, refused = 0;
  for (size_t k = 0; k < cases_.size(); ++k) {
    const Case& c = cases_[k];
    SCOPED_TRACE(c.name);
    const std::string mesh_id = absl::StrCat("m", k);
    client::MeshAxes axes;
    for (const MeshAxis& a : c.axes) axes.push_back({a.name, a.size});
    ASSERT_TRUE(meshes.Create(axes, {.mesh_id = mesh_id, .device_ids = c.device_ids}).ok());
    auto mesh = Mesh::Create(c.axes, c.device_ids);
    ASSERT_TRUE(mesh.ok());
    auto sharding = NamedSharding::Create(*mesh, c.spec);
    ASSERT_TRUE(sharding.ok());
    if (!c.layout_error.empty()) {
      // JAX refuses this process's part: so does its daemon, at once.
      UploadResult r =
          UploadPart(cluster_->address(c.process), mesh_id, c.spec, c.local_shape, c.global_shape,
                     absl::StrCat("bad", k),
                     std::vector<float>(BoxNumElements(FullBox(c.local_shape))), absl::Seconds(5));
      EXPECT_FALSE(r.status.ok());
      if (c.layout_error == "invalid_host_data" || c.layout_error == "nonuniform_global") {
        EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
        EXPECT_THAT(r.status.error_message(), HasSubstr(c.layout_message));
      }
      ++refused;
      continue;
    }
    // Every process's part, laid out by the JAX-conformant geometry.
    std::vector<LocalDataLayout> layouts;
    std::vector<int32_t> participants;
    for (int32_t p = 0; p < GetParam().first; ++p) {
      Shape local = c.local_shape;
      for (size_t d = 0; d < local.size(); ++d) {
        if (c.local_shape[d] != c.layout_global[d]) {
          auto n =
              NumAddressableIndices(*sharding, static_cast<int>(d), c.layout_global, process_of, p);
          ASSERT_TRUE(n.ok());
          local[d] = *n;
        }
      }
      auto layout = ProcessLocalLayout(*sharding, c.layout_global, local, process_of, p);
      if (!layout.ok()) continue;  // a process without devices of the mesh
      layouts.push_back(*std::move(layout));
      participants.push_back(p);
    }
    std::vector<UploadResult> results(participants.size());
    std::vector<std::thread> trainers;
    for (size_t i = 0; i < participants.size(); ++i) {
      trainers.emplace_back([&, i] {
        results[i] = UploadPart(cluster_->address(participants[i]), mesh_id, c.spec,
                                layouts[i].local_shape, c.global_shape, absl::StrCat("case", k),
                                LocalData(layouts[i]), absl::Seconds(30));
      });
    }
    for (auto& t : trainers) t.join();
    // Every process's outcome, so that a failure names them all.
    std::string outcomes;
    for (size_t i = 0; i < results.size(); ++i) {
      absl::StrAppend(&outcomes, "\n  process ", participants[i], ": ",
                      results[i].status.ok() ? "ok" : results[i].status.error_message());
    }
    for (size_t i = 0; i < results.size(); ++i) {
      ASSERT_TRUE(results[i].status.ok()) << outcomes;
      EXPECT_EQ(results[i].response.tensor().id(), results[0].response.tensor().id());
    }
    const std::string id = results[0].response.tensor().id();
    auto info = tensors.Describe(id);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->shape, c.layout_global);
    // The calling process's shards are the table's (JAX's) boxes.
    for (const auto& expected : c.shards) {
      bool found = false;
      for (const auto& shard : info->shards) {
        if (shard.device_id != expected.device_id) continue;
        found = true;
        ASSERT_EQ(shard.ranges.size(), expected.global_box.size());
        for (size_t d = 0; d < shard.ranges.size(); ++d) {
          EXPECT_EQ(shard.ranges[d].begin, expected.global_box[d].begin);
          EXPECT_EQ(shard.ranges[d].end, expected.global_box[d].end);
        }
      }
      EXPECT_TRUE(found) << "device " << expected.device_id;
    }
    // The bytes are the global array the parts were cut from.
    std::vector<float> whole(BoxNumElements(FullBox(c.layout_global)));
    ASSERT_TRUE(tensors.Download(id, client::AsWritableBytes(whole)).ok());
    for (size_t i = 0; i < whole.size(); ++i) {
      ASSERT_EQ(whole[i], ValueAt(static_cast<int64_t>(i))) << "element " << i;
    }
    ASSERT_TRUE(tensors.Delete({id}).ok());
    ++checked;
  }
  GTEST_LOG_(INFO) << checked << " layouts agree with JAX, " << refused
                   << " refused as JAX refuses";
  EXPECT_GT(checked, 10);
}

TEST_P(ClusterProcessLocalTest, MissingOrFailingProcessesEndEveryone) {
  client::MeshClient meshes(*client_);
  const int n = GetParam().first * GetParam().second;
  ASSERT_TRUE(meshes.Create({{"data", n}}, {.mesh_id = "flat"}).ok());
  const PartitionSpec rows{{{"data"}}};
  const Shape local = {GetParam().second * 2, 3};
  std::vector<float> data(BoxNumElements(FullBox(local)), 1.f);
  // Only process 0 comes: DEADLINE_EXCEEDED naming the others.
  UploadResult alone = UploadPart(cluster_->address(0), "flat", rows, local, std::nullopt, "lonely",
                                  data, absl::Seconds(1));
  EXPECT_EQ(alone.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(alone.status.error_message(), HasSubstr("did not arrive"));
  // Process 1 sends too few bytes: everyone fails at once, not at the timeout.
  std::vector<UploadResult> results(GetParam().first);
  std::vector<std::thread> trainers;
  const absl::Time start = absl::Now();
  for (int p = 0; p < GetParam().first; ++p) {
    trainers.emplace_back([&, p] {
      std::vector<float> mine = data;
      if (p == 1) mine.resize(mine.size() - 1);
      results[p] = UploadPart(cluster_->address(p), "flat", rows, local, std::nullopt, "short",
                              mine, absl::Seconds(30));
    });
  }
  for (auto& t : trainers) t.join();
  EXPECT_EQ(results[1].status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  for (int p = 0; p < GetParam().first; ++p) {
    if (p == 1) continue;
    EXPECT_FALSE(results[p].status.ok());
    EXPECT_THAT(results[p].status.error_message(), HasSubstr("process 1 failed its part"));
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  auto listed = client::TensorClient(*client_).List();
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());
}

INSTANTIATE_TEST_SUITE_P(Clusters, ClusterProcessLocalTest,
                         ::testing::Values(std::make_pair(2, 4), std::make_pair(4, 2)),
                         [](const auto& info) {
                           return absl::StrCat(info.param.first, "x", info.param.second);
                         });

}  // namespace
}  // namespace placement::testing
