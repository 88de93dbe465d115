// CoordinatorClient (the gRPC CoordinatorApi) against a real Coordinator
// and ClusterService on 127.0.0.1 port 0, with nodes assembled as the
// daemon assembles them (peer_test_node.h): formation, heartbeats, the
// key-value store, barriers and tickets, context failures, the cluster's
// meshes, and an unreachable coordinator.
#include "server/peer/coordinator_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/peer/peer_test_node.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;
using testing::PeerTestNode;
using testing::StartNodes;

// A loopback port nothing listens on (bound, then closed).
int ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(CoordinatorClientTest, NodesFormOneClusterWithDenseDeviceIds) {
  auto nodes = StartNodes(2);
  for (const auto& node : nodes) {
    std::shared_ptr<const ClusterView> view = node->cluster->view();
    ASSERT_EQ(view->processes.size(), 2u);
    EXPECT_EQ(view->state, ClusterState::kFormed);
    EXPECT_EQ(view->processes[0].first_device_id, 0);
    EXPECT_EQ(view->processes[1].first_device_id, testing::kNodeDevices);
    EXPECT_EQ(view->processes[1].peer_address, nodes[1]->address);
    EXPECT_TRUE(view->IsAlive(0) && view->IsAlive(1));
  }
  // Heartbeats and topology through the client see the same cluster.
  CoordinatorApi* coordinator = nodes[1]->cluster->coordinator();
  EXPECT_EQ(coordinator->address(), nodes[0]->address);
  auto beat = coordinator->Heartbeat(1, "instance-1", nodes[1]->cluster->epoch(), absl::Seconds(5));
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_EQ(beat->epoch, nodes[1]->cluster->epoch());
  // The caller's epoch is current: the answer carries the version only.
  EXPECT_TRUE(beat->processes.empty());
  auto behind = coordinator->Heartbeat(1, "instance-1", 0, absl::Seconds(5));
  ASSERT_TRUE(behind.ok()) << behind.status();
  EXPECT_EQ(behind->processes.size(), 2u);
  auto topology = coordinator->Topology(absl::Seconds(5));
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_EQ(topology->processes.size(), 2u);
  // An instance the coordinator does not know is no member.
  auto stranger = coordinator->Heartbeat(1, "someone-else", 0, absl::Seconds(5));
  EXPECT_EQ(stranger.status().code(), absl::StatusCode::kNotFound) << stranger.status();
}

TEST(CoordinatorClientTest, KeyValueStoreWaitsForKeysAndNamesMissingOnes) {
  auto nodes = StartNodes(2);
  CoordinatorApi* zero = nodes[0]->cluster->coordinator();
  CoordinatorApi* one = nodes[1]->cluster->coordinator();
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_TRUE(zero->Set("rendezvous/a", "127.0.0.1:9").ok());
  });
  auto got = one->Get("rendezvous/a", absl::Seconds(20));
  writer.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "127.0.0.1:9");
  auto missing = one->Get("rendezvous/never", absl::Milliseconds(200));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("rendezvous/never"));
  // No wait (a rendezvous whose budget is spent) looks once: the key's
  // value, or the coordinator's word naming it -- not the coordinator's
  // default wait cut short by the call's deadline.
  auto now = one->Get("rendezvous/a", absl::ZeroDuration());
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(*now, "127.0.0.1:9");
  const absl::Time asked = absl::Now();
  auto spent = one->Get("rendezvous/never", -absl::Seconds(1));
  EXPECT_EQ(spent.status().code(), absl::StatusCode::kDeadlineExceeded) << spent.status();
  EXPECT_THAT(std::string(spent.status().message()), HasSubstr("rendezvous/never"));
  // It looked once: not the coordinator's default wait of 30 s.
  EXPECT_LT(absl::Now() - asked, absl::Seconds(5));
}

// A draining daemon leaves and stays gone: its heartbeats stop before it
// says so (a beat after it, refused, would make it join again and count
// it as alive until the detection bound passes after it exited).
TEST(CoordinatorClientTest, ALeftDaemonStaysGone) {
  auto nodes = StartNodes(2);
  nodes[1]->cluster->Leave();
  CoordinatorApi* coordinator = nodes[0]->cluster->coordinator();
  // Ten of its heartbeat intervals: a beat would have come and joined.
  absl::SleepFor(absl::Seconds(1));
  auto topology = coordinator->Topology(absl::Seconds(5));
  ASSERT_TRUE(topology.ok()) << topology.status();
  ASSERT_EQ(topology->processes.size(), 2u);
  EXPECT_EQ(topology->processes[1].state, ProcessState::kLeft);
}

// A daemon that sees a peer's request stamped with a newer epoch than its
// view asks the coordinator at once instead of waiting for its next beat
// (30 s here): the view it then decides on has the change.
TEST(CoordinatorClientTest, AwaitEpochTakesInANewerViewWithoutWaitingForTheNextBeat) {
  auto nodes = StartNodes(3, absl::Seconds(30));
  const int64_t before = nodes[1]->cluster->epoch();
  nodes[2]->cluster->Leave();
  auto topology = nodes[0]->cluster->coordinator()->Topology(absl::Seconds(5));
  ASSERT_TRUE(topology.ok()) << topology.status();
  ASSERT_GT(topology->epoch, before);
  // Node 1 has not beaten since: its view is the old one.
  EXPECT_EQ(nodes[1]->cluster->epoch(), before);
  EXPECT_TRUE(nodes[1]->cluster->view()->IsAlive(2));
  EXPECT_TRUE(nodes[1]->cluster->AwaitEpoch(topology->epoch, absl::Now() + absl::Seconds(10)));
  EXPECT_GE(nodes[1]->cluster->epoch(), topology->epoch);
  EXPECT_FALSE(nodes[1]->cluster->view()->IsAlive(2));
  // An epoch nobody has reached: false at the deadline.
  EXPECT_FALSE(
      nodes[1]->cluster->AwaitEpoch(topology->epoch + 5, absl::Now() + absl::Milliseconds(300)));
}

// Beats asked for by AwaitEpoch while the coordinator is away are not
// counted as missed beats: twenty of them in a second do not declare it
// lost (5 misses would); the detection bound (1 s x 5) still does.
TEST(CoordinatorClientTest, AskedForBeatsAreNotMisses) {
  auto nodes = StartNodes(2, absl::Seconds(1));
  const int64_t epoch = nodes[1]->cluster->epoch();
  nodes[0]->Stop();
  const absl::Time stopped = absl::Now();
  for (int i = 0; i < 20; ++i) {
    EXPECT_FALSE(nodes[1]->cluster->AwaitEpoch(epoch + 1, absl::Now() + absl::Milliseconds(50)));
  }
  if (absl::Now() - stopped < absl::Seconds(3)) {
    EXPECT_NE(nodes[1]->cluster->view()->state, ClusterState::kFailed);
  }
  const absl::Time limit = absl::Now() + absl::Seconds(30);
  while (nodes[1]->cluster->view()->state != ClusterState::kFailed && absl::Now() < limit) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(nodes[1]->cluster->view()->state, ClusterState::kFailed);
  // On a kFailed view no beat can be asked for: the wait is capped at one
  // heartbeat interval (1 s), not the caller's 60 s.
  const absl::Time asked = absl::Now();
  EXPECT_FALSE(nodes[1]->cluster->AwaitEpoch(epoch + 1, absl::Now() + absl::Seconds(60)));
  EXPECT_LT(absl::Now() - asked, absl::Seconds(30));
}

// A call registered after its process was declared lost (the caller
// looked at the view just before): cancelled at once, not left to run
// until its own deadline.
TEST(CoordinatorClientTest, ACallToAProcessAlreadyLostIsCancelledAtOnce) {
  auto nodes = StartNodes(2);
  nodes[1]->cluster->StopHeartbeats();  // silent: the coordinator declares it lost
  nodes[1]->Stop();
  const absl::Time limit = absl::Now() + absl::Seconds(30);
  while (nodes[0]->cluster->view()->IsAlive(1) && absl::Now() < limit) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_FALSE(nodes[0]->cluster->view()->IsAlive(1));
  int cancelled = 0;
  {
    Cluster::CallGuard guard(nodes[0]->cluster.get(), 1, [&] { ++cancelled; });
  }
  EXPECT_GE(cancelled, 1);
  // A call to a live process is left alone.
  int live = 0;
  {
    Cluster::CallGuard guard(nodes[0]->cluster.get(), 0, [&] { ++live; });
  }
  EXPECT_EQ(live, 0);
}

TEST(CoordinatorClientTest, BarriersAgreeAndHandOutTicketsInOrder) {
  auto nodes = StartNodes(2);
  auto arrive = [&](int p, const std::string& id, const std::string& payload) {
    BarrierArrival arrival;
    arrival.barrier_id = id;
    arrival.process_index = p;
    arrival.participants = {0, 1};
    arrival.payload = payload;
    arrival.timeout = absl::Seconds(20);
    arrival.sequence_key = "coll/0,1";
    return nodes[p]->cluster->coordinator()->Barrier(arrival);
  };
  for (int64_t round = 0; round < 2; ++round) {
    std::vector<absl::StatusOr<BarrierResult>> results(2, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int p = 0; p < 2; ++p) {
      threads.emplace_back(
          [&, p] { results[p] = arrive(p, absl::StrCat("op/", round), absl::StrCat("from ", p)); });
    }
    for (auto& t : threads) t.join();
    for (int p = 0; p < 2; ++p) ASSERT_TRUE(results[p].ok()) << results[p].status();
    EXPECT_EQ(results[0]->token, results[1]->token);
    EXPECT_EQ(results[0]->ticket, round);
    EXPECT_EQ(results[1]->ticket, round);
    EXPECT_THAT(results[0]->payloads, ::testing::ElementsAre("from 0", "from 1"));
  }
  // A failed context moves the set to its next generation.
  auto generation = nodes[1]->cluster->coordinator()->ReportContextFailure("coll/0,1", 0, "test");
  ASSERT_TRUE(generation.ok()) << generation.status();
  EXPECT_EQ(*generation, 1);
}

TEST(CoordinatorClientTest, MeshesAreTheClustersAndReachEveryNode) {
  auto nodes = StartNodes(2);
  CoordinatorApi* one = nodes[1]->cluster->coordinator();
  auto created = one->CreateMesh("team", "grid", {{"data", 2}, {"model", 2}}, {0, 1, 2, 3});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->id, "grid");
  EXPECT_EQ(created->mesh.num_devices(), 4);
  auto listed = one->ListMeshes();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].tenant, "team");
  // The coordinator pushed it to node 1 before answering.
  ASSERT_EQ(nodes[1]->services->mesh_authority()->ListMeshes().size(), 1u);
  auto deleted = one->DeleteMesh("grid", "team", false, false);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_TRUE(nodes[1]->services->mesh_authority()->ListMeshes().empty());
  auto gone = one->DeleteMesh("grid", "team", false, false);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound) << gone.status();
}

TEST(CoordinatorClientTest, AnUnreachableCoordinatorIsUnavailableNamingIt) {
  PeerChannels channels(PeerSecurity{});
  const std::string address = absl::StrCat("127.0.0.1:", ClosedPort());
  CoordinatorClient client(&channels, address);
  auto topology = client.Topology(absl::Seconds(2));
  EXPECT_EQ(topology.status().code(), absl::StatusCode::kUnavailable) << topology.status();
  EXPECT_THAT(std::string(topology.status().message()), HasSubstr("coordinator at " + address));
  absl::Status set = client.Set("k", "v");
  EXPECT_EQ(set.code(), absl::StatusCode::kUnavailable) << set;
}

}  // namespace
}  // namespace placement::server
