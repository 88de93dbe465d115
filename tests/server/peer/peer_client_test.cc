// PeerClient (the gRPC PeerTransport) between nodes assembled as the daemon
// assembles them (peer_test_node.h), each a real PeerService on 127.0.0.1
// port 0: another daemon's devices, installing and removing meshes, tensor
// records committed, listed, aborted and deleted, shards written to another
// daemon and read back as boxes, and a daemon that is gone; and every
// asynchronous form fanned out to several daemons at once (FanOutAsync, as
// FanOutCall runs it).
#include "server/peer/peer_client.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/cluster/cluster_tensors.h"
#include "server/cluster/fan_out.h"
#include "tests/server/peer/peer_test_node.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;
using testing::kNodeDevices;
using testing::StartNodes;

// Waits (up to 10 s) until `node`'s devices hold `bytes` in use: a stream
// the client closed lets go of its tensor when the server's side of the
// call ends, moments later.
int64_t MemoryInUseSettlesAt(const testing::PeerTestNode& node, int64_t bytes) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline && node.inventory->TotalMemoryInUse() != bytes) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  return node.inventory->TotalMemoryInUse();
}

// A record of f32[shape] on one device (no buffer: a shell).
std::unique_ptr<Tensor> Record(const std::string& id, int64_t device, Shape shape,
                               int32_t process) {
  auto t = std::make_unique<Tensor>();
  t->id = id;
  t->dtype = DType::kF32;
  t->shape = std::move(shape);
  t->owner = TensorOwner("team", "");
  t->sharding = NamedSharding::SingleDevice(device);
  auto domains = t->sharding.IndexDomains(t->shape);
  EXPECT_TRUE(domains.ok()) << domains.status();
  for (ShardDomain& d : *domains) t->shards.push_back(Shard{std::move(d), nullptr, process});
  return t;
}

TEST(PeerClientTest, AnotherDaemonsDevicesWithTheirAccounting) {
  auto nodes = StartNodes(2);
  auto devices = nodes[0]->client->GetLocalDevices(1, absl::Seconds(5));
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), static_cast<size_t>(kNodeDevices));
  EXPECT_EQ((*devices)[0].description.id, kNodeDevices);
  EXPECT_EQ((*devices)[0].description.process_index, 1);
  EXPECT_EQ((*devices)[0].memory_in_use_bytes, 0);
}

TEST(PeerClientTest, MeshesInstalledAndRemovedOnAnotherDaemon) {
  auto nodes = StartNodes(2);
  RegisteredMesh mesh{"row", std::move(Mesh::Create({{"x", 4}}, {0, 1, 2, 3})).value(), "team"};
  ASSERT_TRUE(nodes[0]->client->InstallMesh(1, mesh).ok());
  auto there = nodes[1]->services->mesh_authority()->ListMeshes();
  ASSERT_EQ(there.size(), 1u);
  EXPECT_EQ(there[0].id, "row");
  EXPECT_EQ(there[0].tenant, "team");
  auto removed = nodes[0]->client->RemoveMesh(1, "row", /*force=*/false);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 0);
  EXPECT_TRUE(nodes[1]->services->mesh_authority()->ListMeshes().empty());
}

TEST(PeerClientTest, RecordsCommittedListedAndDeleted) {
  auto nodes = StartNodes(2);
  PeerClient& client = *nodes[0]->client;
  auto listed = client.ListTensorRecords(1);
  ASSERT_TRUE(listed.ok()) << listed.status();
  const size_t before = listed->size();
  // A tensor whose only shard is on node 0: node 1 holds its record.
  std::unique_ptr<Tensor> record = Record("t-record", /*device=*/0, {8}, /*process=*/0);
  ASSERT_TRUE(client.Commit(1, {record.get()}, {}).ok());
  listed = client.ListTensorRecords(1);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), before + 1);
  bool found = false;
  for (const auto& shell : *listed) {
    if (shell->id != "t-record") continue;
    found = true;
    EXPECT_EQ(shell->shape, (Shape{8}));
    ASSERT_EQ(shell->shards.size(), 1u);
    EXPECT_EQ(shell->shards[0].process_index, 0);
    EXPECT_EQ(shell->shards[0].buffer, nullptr);
  }
  EXPECT_TRUE(found);
  // Deleting the record frees nothing on node 1 (it held no bytes).
  auto freed = client.DeleteTensors(1, {"t-record"});
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_EQ(*freed, 0);
  listed = client.ListTensorRecords(1);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), before);
}

// A driver's Abort ends its operation's ids for good on the daemon it
// reaches: an installed one is deleted (a collective's part installs its
// results when it succeeds), and one that is not there yet is refused to the
// part that ends later (ABORTED), which keeps no memory.
TEST(PeerClientTest, AnAbortDeletesInstalledIdsAndRefusesLaterOnes) {
  auto nodes = StartNodes(2);
  PeerClient& client = *nodes[0]->client;
  const int64_t device = kNodeDevices;  // node 1's first device
  const int64_t baseline = nodes[1]->inventory->TotalMemoryInUse();
  std::vector<float> values(32, 1.0f);
  const ByteRun all{0, 0, static_cast<int64_t>(values.size() * sizeof(float))};
  auto write = [&](const Tensor& record) -> absl::Status {
    auto writer = client.OpenShardWriter(1, record, absl::Seconds(30), absl::Seconds(10));
    if (!writer.ok()) return writer.status();
    absl::Status wrote =
        (*writer)->Write({&device, 1}, {&all, 1}, reinterpret_cast<const char*>(values.data()));
    if (!wrote.ok()) return wrote;
    return (*writer)->Finish();
  };
  std::unique_ptr<Tensor> installed = Record("t-installed", device, {4, 8}, /*process=*/1);
  ASSERT_TRUE(write(*installed).ok());
  ASSERT_TRUE(client.Commit(1, {installed.get()}, {}).ok());
  EXPECT_GT(nodes[1]->inventory->TotalMemoryInUse(), baseline);
  ASSERT_TRUE(client.Abort(1, {"t-installed", "t-late"}).ok());
  EXPECT_EQ(nodes[1]->inventory->TotalMemoryInUse(), baseline);
  auto listed = client.ListTensorRecords(1);
  ASSERT_TRUE(listed.ok()) << listed.status();
  for (const auto& shell : *listed) EXPECT_NE(shell->id, "t-installed");
  // The part of "t-late" ends after its driver's Abort.
  absl::Status late = write(*Record("t-late", device, {4, 8}, /*process=*/1));
  EXPECT_EQ(late.code(), absl::StatusCode::kAborted) << late;
  EXPECT_THAT(late.message(), HasSubstr("'t-late' was aborted by the daemon driving"));
  EXPECT_EQ(nodes[1]->services->pending_tensors(), 0);
  EXPECT_EQ(nodes[1]->inventory->TotalMemoryInUse(), baseline);
}

TEST(PeerClientTest, ShardsWrittenToAnotherDaemonReadBackAsBoxes) {
  auto nodes = StartNodes(2);
  PeerClient& client = *nodes[0]->client;
  const int64_t device = kNodeDevices;  // node 1's first device
  const int64_t baseline = nodes[1]->inventory->TotalMemoryInUse();
  std::unique_ptr<Tensor> record = Record("t-written", device, {4, 8}, /*process=*/1);
  std::vector<float> values(32);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  auto writer = client.OpenShardWriter(1, *record, absl::Seconds(30), absl::Seconds(10));
  ASSERT_TRUE(writer.ok()) << writer.status();
  const ByteRun all{0, 0, static_cast<int64_t>(values.size() * sizeof(float))};
  ASSERT_TRUE(
      (*writer)->Write({&device, 1}, {&all, 1}, reinterpret_cast<const char*>(values.data())).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  // Pending on node 1 until committed there.
  ASSERT_TRUE(client.Commit(1, {record.get()}, {}).ok());
  EXPECT_GT(nodes[1]->inventory->TotalMemoryInUse(), baseline);
  // Rows 1..2, columns 2..5 of the shard.
  auto box = client.OpenBox(1, "t-written", device, Box{{1, 3}, {2, 6}}, absl::Seconds(10));
  ASSERT_TRUE(box.ok()) << box.status();
  std::vector<float> got(8);
  ASSERT_TRUE((*box)->Read(reinterpret_cast<char*>(got.data()), 8 * sizeof(float)).ok());
  EXPECT_THAT(got, ::testing::ElementsAre(5.0f, 5.5f, 6.0f, 6.5f, 9.0f, 9.5f, 10.0f, 10.5f));
  box->reset();
  auto freed = client.DeleteTensors(1, {"t-written"});
  ASSERT_TRUE(freed.ok()) << freed.status();
  EXPECT_GT(*freed, 0);
  EXPECT_EQ(MemoryInUseSettlesAt(*nodes[1], baseline), baseline);
  // A box of a tensor node 1 does not have is its NOT_FOUND.
  auto none = client.OpenBox(1, "t-written", device, Box{{0, 1}, {0, 1}}, absl::Seconds(10));
  if (none.ok()) {
    float one = 0;
    EXPECT_EQ((*none)->Read(reinterpret_cast<char*>(&one), sizeof(one)).code(),
              absl::StatusCode::kNotFound);
  } else {
    EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  }
}

TEST(PeerClientTest, ADaemonThatIsGoneIsUnavailableNamingIt) {
  auto nodes = StartNodes(2);
  nodes[1]->Stop();
  auto devices = nodes[0]->client->GetLocalDevices(1, absl::Seconds(5));
  EXPECT_THAT(devices.status().code(),
              ::testing::AnyOf(absl::StatusCode::kUnavailable, absl::StatusCode::kDeadlineExceeded))
      << devices.status();
  EXPECT_THAT(std::string(devices.status().message()), HasSubstr("process 1"));
}

// The asynchronous forms, as the fan-outs run them: every call started, then
// each waited for on this thread.
class PeerClientAsyncTest : public ::testing::Test {
 protected:
  void SetUp() override { nodes_ = StartNodes(3); }

  // Fans `start` out from node 0 to nodes 1 and 2 with no thread per node.
  absl::Status ToOthers(const StartCall& start) { return FanOutAsync({1, 2}, start); }
  PeerClient& client() { return *nodes_[0]->client; }

  std::vector<std::unique_ptr<testing::PeerTestNode>> nodes_;
};

TEST_F(PeerClientAsyncTest, MeshesInstalledAndRemovedOnEveryOtherDaemon) {
  RegisteredMesh mesh{"row", std::move(Mesh::Create({{"x", 2}}, {0, 1})).value(), "team"};
  ASSERT_TRUE(ToOthers([&](int32_t p, PeerTransport::Done done) {
                return client().StartInstallMesh(p, mesh, std::move(done));
              }).ok());
  for (int n : {1, 2}) {
    auto there = nodes_[n]->services->mesh_authority()->ListMeshes();
    ASSERT_EQ(there.size(), 1u) << "node " << n;
    EXPECT_EQ(there[0].id, "row");
  }
  ASSERT_TRUE(ToOthers([&](int32_t p, PeerTransport::Done done) {
                return client().StartRemoveMesh(p, "row", /*force=*/false, std::move(done));
              }).ok());
  for (int n : {1, 2}) EXPECT_TRUE(nodes_[n]->services->mesh_authority()->ListMeshes().empty());
}

TEST_F(PeerClientAsyncTest, RecordsCommittedAbortedAndDeletedOnEveryOtherDaemon) {
  std::unique_ptr<Tensor> record = Record("t-fanned", /*device=*/0, {8}, /*process=*/0);
  auto holds = [&](int n) {
    auto listed = nodes_[0]->client->ListTensorRecords(n);
    EXPECT_TRUE(listed.ok()) << listed.status();
    for (const auto& shell : *listed) {
      if (shell->id == "t-fanned") return true;
    }
    return false;
  };
  // FanOutCall, as the cluster layer calls it: the Start* form named, its
  // arguments given once (braced lists too).
  ASSERT_TRUE(FanOutCall(&client(), {1, 2}, &PeerTransport::StartCommit)({record.get()}, {}).ok());
  EXPECT_TRUE(holds(1));
  EXPECT_TRUE(holds(2));
  // With this daemon's own part: run here, no call to process 0.
  int own = 0;
  EXPECT_TRUE(FanOutCall(&client(), {0, 1, 2},
                         {0,
                          [&] {
                            ++own;
                            return absl::OkStatus();
                          }},
                         &PeerTransport::StartAbort)({"t-fanned", "t-nothing"})
                  .ok());
  EXPECT_EQ(own, 1);
  ASSERT_TRUE(ToOthers([&](int32_t p, PeerTransport::Done done) {
                return client().StartDeleteTensors(p, {"t-fanned"}, std::move(done));
              }).ok());
  EXPECT_FALSE(holds(1));
  EXPECT_FALSE(holds(2));
}

TEST_F(PeerClientAsyncTest, EveryOtherDaemonsDevices) {
  std::vector<std::vector<DeviceState>> got(3);
  ASSERT_TRUE(
      ToOthers([&](int32_t p, PeerTransport::Done done) {
        return client().StartGetLocalDevices(
            p, absl::Seconds(5),
            [&got, p, done = std::move(done)](absl::StatusOr<std::vector<DeviceState>> devices) {
              if (devices.ok()) got[p] = *std::move(devices);
              done(devices.status());
            });
      }).ok());
  for (int p : {1, 2}) {
    ASSERT_EQ(got[p].size(), static_cast<size_t>(kNodeDevices)) << "process " << p;
    EXPECT_EQ(got[p][0].description.process_index, p);
  }
}

TEST_F(PeerClientAsyncTest, PreparesReachEveryOtherDaemonAndKeepTheirErrors) {
  // No daemon holds the sources: each answers NOT_FOUND from its own
  // Prepare of the op (a Place, an Assemble, a Disassemble).
  std::unique_ptr<Tensor> result = Record("t-result", /*device=*/0, {8}, /*process=*/0);
  const absl::Status place = ToOthers([&](int32_t p, PeerTransport::Done done) {
    return client().StartPreparePlace(p, "t-absent", *result, std::move(done));
  });
  EXPECT_EQ(place.code(), absl::StatusCode::kNotFound) << place;
  EXPECT_THAT(std::string(place.message()), HasSubstr("t-absent"));
  const absl::Status assemble = ToOthers([&](int32_t p, PeerTransport::Done done) {
    return client().StartPrepareAssemble(p, {"t-absent"}, *result, /*donate=*/false,
                                         std::move(done));
  });
  EXPECT_EQ(assemble.code(), absl::StatusCode::kNotFound) << assemble;
  const absl::Status disassemble = ToOthers([&](int32_t p, PeerTransport::Done done) {
    return client().StartPrepareDisassemble(p, "t-absent", {"t-piece"}, /*donate=*/true,
                                            std::move(done));
  });
  EXPECT_EQ(disassemble.code(), absl::StatusCode::kNotFound) << disassemble;
}

TEST_F(PeerClientAsyncTest, ADaemonThatIsGoneIsNamedAmongTheOthers) {
  nodes_[2]->Stop();
  std::unique_ptr<Tensor> record = Record("t-half", /*device=*/0, {8}, /*process=*/0);
  const absl::Status s = ToOthers([&](int32_t p, PeerTransport::Done done) {
    return client().StartCommit(p, {record.get()}, {}, std::move(done));
  });
  EXPECT_THAT(s.code(),
              ::testing::AnyOf(absl::StatusCode::kUnavailable, absl::StatusCode::kDeadlineExceeded))
      << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("process 2"));
  EXPECT_TRUE(IsUnreachable(s));
}

// An Abort that could not reach a daemon that is still a member is tried
// again until it does (ClusterTensors::AbortOn): here node 1's calls are
// refused while the Abort is sent, then let in, and its installed result
// goes within a few seconds.
TEST(PeerClientTest, AnAbortThatDidNotReachAMemberIsTriedAgain) {
  auto nodes = StartNodes(2);
  const int64_t device = kNodeDevices;  // node 1's first device
  const int64_t baseline = nodes[1]->inventory->TotalMemoryInUse();
  std::unique_ptr<Tensor> installed = Record("t-retried", device, {4, 8}, /*process=*/1);
  std::vector<float> values(32, 1.0f);
  const ByteRun all{0, 0, static_cast<int64_t>(values.size() * sizeof(float))};
  auto writer =
      nodes[0]->client->OpenShardWriter(1, *installed, absl::Seconds(30), absl::Seconds(10));
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(
      (*writer)->Write({&device, 1}, {&all, 1}, reinterpret_cast<const char*>(values.data())).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  ASSERT_TRUE(nodes[0]->client->Commit(1, {installed.get()}, {}).ok());
  EXPECT_GT(nodes[1]->inventory->TotalMemoryInUse(), baseline);
  // Node 0's driver side, as the daemon's ClusterTensors would abort.
  TensorStore store(nodes[0]->backend.get(), TensorStoreOptions{});
  ClusterTensors driver(nodes[0]->cluster.get(), &store, nodes[0]->client.get(), absl::Seconds(30));
  nodes[1]->gate.SetNotReady("the test holds node 1's calls");
  driver.AbortOn({1}, {"t-retried"});
  EXPECT_EQ(driver.abort_retries(), 1);
  EXPECT_GT(nodes[1]->inventory->TotalMemoryInUse(), baseline);
  nodes[1]->gate.SetReady();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline && nodes[1]->inventory->TotalMemoryInUse() != baseline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(nodes[1]->inventory->TotalMemoryInUse(), baseline);
  EXPECT_EQ(driver.abort_retries(), 0);
}

// What an Abort leaves behind is bounded by the pending lifetime: the mark
// that refuses a late part of an aborted id, and an Abort still being
// retried for a member that never takes it, are both gone once it passed.
TEST(PeerClientTest, AbortMarksAndRetriesEndWithThePendingLifetime) {
  auto nodes = StartNodes(2);
  TensorStore store(nodes[0]->backend.get(), TensorStoreOptions{});
  ClusterTensors tensors(nodes[0]->cluster.get(), &store, nodes[0]->client.get(), absl::Seconds(1));
  tensors.AbortForDriver({"t-marked"});
  EXPECT_EQ(tensors.AddPending(Record("t-marked", 0, {8}, /*process=*/0)).code(),
            absl::StatusCode::kAborted);
  nodes[1]->gate.SetNotReady("the test holds node 1's calls");
  tensors.AbortOn({1}, {"t-never"});
  EXPECT_EQ(tensors.abort_retries(), 1);
  // The reaper runs every second; the lifetime is 1 s.
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline && tensors.abort_retries() != 0) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(tensors.abort_retries(), 0);
  absl::Status pending = absl::AbortedError("");
  while (absl::Now() < deadline && pending.code() == absl::StatusCode::kAborted) {
    pending = tensors.AddPending(Record("t-marked", 0, {8}, /*process=*/0));
    if (pending.code() == absl::StatusCode::kAborted) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(pending.ok()) << pending;
  tensors.AbortHere({"t-marked"});
  nodes[1]->gate.SetReady();
}

}  // namespace
}  // namespace placement::server
