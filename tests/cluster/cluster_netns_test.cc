// The cluster as separate hosts: every daemon in its own network namespace,
// joined by veth pairs to a bridge (tests/testing/network_namespaces.h), so
// daemons reach each other on real, distinct addresses (10.A.B.1, .2, ...)
// and not over loopback. The checks of cluster_membership_test.cc
// (formation with dense ids, loss and rejoin, meshes the same everywhere)
// plus a network partition: one namespace's link goes down (both sides see
// the split) and comes back (the dropped daemon joins again by itself).
//
// Needs root and iproute2; skipped, saying why, where namespaces cannot be
// made.
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/meshes.h"
#include "tests/cluster/cluster_test_util.h"

namespace placement::testing {
namespace {

using ::testing::HasSubstr;

class ClusterNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!NetworkNamespaces::Usable().ok()) {
      GTEST_SKIP() << "network namespaces cannot be made on this machine ("
                   << NetworkNamespaces::Usable()
                   << "); cluster_membership_test runs the same checks over loopback";
    }
  }

  // A cluster of `options.num_processes` daemons, each in its own namespace.
  std::unique_ptr<ClusterProcesses> Start(ClusterOptions options) {
    options.namespaces = true;
    auto cluster = ClusterProcesses::Start(options);
    EXPECT_TRUE(cluster.ok()) << cluster.status();
    return cluster.ok() ? *std::move(cluster) : nullptr;
  }

  static std::unique_ptr<client::Client> Connect(const ClusterProcesses& cluster, int i) {
    auto client = cluster.Connect(i);
    EXPECT_TRUE(client.ok()) << "daemon " << i << ": " << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // Detection bound of the default ClusterOptions (250 ms x 8), plus a
  // sweep, a beat and a loaded machine's scheduling.
  static constexpr absl::Duration kDetection = absl::Seconds(2);
  static constexpr absl::Duration kSlack = absl::Seconds(3);
};

TEST_F(ClusterNetnsTest, DaemonsOnSeparateHostsFormOneClusterWithDenseIds) {
  ClusterOptions options;
  options.num_processes = 3;
  options.devices_per_process = 2;
  options.per_process = {{}, {"--cpu_devices=3"}, {}};
  auto cluster = Start(options);
  ASSERT_NE(cluster, nullptr);
  NetworkNamespaces& ns = *cluster->namespaces();
  const std::vector<int32_t> expected_process = {0, 0, 1, 1, 1, 2, 2};
  for (int d = 0; d < 3; ++d) {
    // The test reaches each daemon on its namespace's own address.
    EXPECT_EQ(cluster->address(d), absl::StrCat(ns.address(d), ":50051"));
    auto client = Connect(*cluster, d);
    ASSERT_NE(client, nullptr);
    auto devices = client->ListDevices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    ASSERT_EQ(devices->size(), 7u) << "daemon " << d;
    for (size_t i = 0; i < devices->size(); ++i) {
      EXPECT_EQ((*devices)[i].id, static_cast<int64_t>(i));
      EXPECT_EQ((*devices)[i].process_index, expected_process[i]);
    }
    auto status = client->GetStatus();
    ASSERT_TRUE(status.ok()) << status.status();
    EXPECT_EQ(status->process_index, d);
    EXPECT_EQ(status->cluster.state, client::ClusterState::kFormed) << cluster->daemon(d).Stderr();
    EXPECT_EQ(status->cluster.coordinator_address, absl::StrCat(ns.address(0), ":7000"));
    EXPECT_EQ(status->cluster.peer_address, absl::StrCat(ns.address(d), ":7000"));
    ASSERT_EQ(status->cluster.processes.size(), 3u);
    for (int p = 0; p < 3; ++p) {
      const client::ProcessStatus& process = status->cluster.processes[p];
      EXPECT_EQ(process.state, client::ProcessState::kAlive);
      // Every daemon advertises its own host's address, not loopback.
      EXPECT_EQ(process.peer_address, absl::StrCat(ns.address(p), ":7000"));
    }
    EXPECT_EQ(status->cluster.processes[1].first_device_id, 2);
    EXPECT_EQ(status->cluster.processes[1].num_devices, 3);
    const std::string log = cluster->daemon(d).Stderr();
    // --allow_insecure off loopback: the peer port is named as plaintext too.
    EXPECT_THAT(log, HasSubstr(absl::StrCat(
                         "serving the daemon-to-daemon services plaintext on non-loopback "
                         "--peer_listen=",
                         ns.address(d), ":7000")));
    // Gloo binds the peer interface (the namespace's address), no wildcard.
    EXPECT_THAT(log, HasSubstr(absl::StrCat("collectives between daemons over gloo on ",
                                            ns.address(d), "\n")));
  }
}

TEST_F(ClusterNetnsTest, KilledProcessIsDetectedAndRejoins) {
  ClusterOptions options;
  options.num_processes = 3;
  options.devices_per_process = 2;
  auto cluster = Start(options);
  ASSERT_NE(cluster, nullptr);
  auto c0 = Connect(*cluster, 0);
  auto c1 = Connect(*cluster, 1);
  ASSERT_TRUE(c0 != nullptr && c1 != nullptr);
  auto before = c0->GetStatus();
  ASSERT_TRUE(before.ok());

  const absl::Time killed = absl::Now();
  cluster->Kill(2);
  auto lost = WaitForStatus(*c0, [](const client::DaemonStatus& s) {
    return ProcessIs(s, 2, client::ProcessState::kLost);
  });
  ASSERT_TRUE(lost.ok()) << lost.status();
  ASSERT_TRUE(ProcessIs(*lost, 2, client::ProcessState::kLost));
  EXPECT_LT(absl::Now() - killed, kDetection + kSlack);
  EXPECT_EQ(lost->cluster.state, client::ClusterState::kDegraded);
  EXPECT_GT(lost->cluster.epoch, before->cluster.epoch);
  auto seen_by_1 = WaitForStatus(*c1, [](const client::DaemonStatus& s) {
    return ProcessIs(s, 2, client::ProcessState::kLost);
  });
  ASSERT_TRUE(seen_by_1.ok());
  EXPECT_TRUE(ProcessIs(*seen_by_1, 2, client::ProcessState::kLost));

  ASSERT_TRUE(cluster->Restart(2).ok()) << cluster->daemon(2).Stderr();
  auto back = WaitForStatus(*c0, [](const client::DaemonStatus& s) {
    return s.cluster.state == client::ClusterState::kFormed;
  });
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->cluster.state, client::ClusterState::kFormed);
  EXPECT_EQ(back->cluster.processes[2].joins, 2);
  auto c2 = Connect(*cluster, 2);
  ASSERT_NE(c2, nullptr);
  auto devices = c2->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 6u);
  EXPECT_EQ((*devices)[4].id, 4);
  EXPECT_EQ((*devices)[4].process_index, 2);
}

TEST_F(ClusterNetnsTest, MeshesAreTheSameOnEveryHost) {
  ClusterOptions options;
  options.num_processes = 2;
  auto cluster = Start(options);
  ASSERT_NE(cluster, nullptr);
  auto c0 = Connect(*cluster, 0);
  auto c1 = Connect(*cluster, 1);
  ASSERT_TRUE(c0 != nullptr && c1 != nullptr);
  client::MeshClient m0(*c0), m1(*c1);
  // Created on host 1 with devices of both hosts, in a chosen order.
  client::CreateMeshOptions explicit_devices;
  explicit_devices.mesh_id = "global";
  explicit_devices.device_ids = {4, 0, 5, 1, 6, 2, 7, 3};
  auto mesh = m1.Create({{"data", 2}, {"model", 4}}, explicit_devices);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  auto seen = m0.Get("global");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->mesh.device_ids, mesh->device_ids);
  auto dp = m0.CreateDataParallel();
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ(dp->total_devices, 8);
  auto dp_on_1 = m1.Get(dp->id);
  ASSERT_TRUE(dp_on_1.ok()) << dp_on_1.status();
  EXPECT_EQ(dp_on_1->mesh.device_ids, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(m0.Create({{"data", 8}}, explicit_devices).status().code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(m0.Delete("global").ok());
  EXPECT_EQ(m1.Get("global").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClusterNetnsTest, PartitionedProcessIsLostAndRejoinsWhenTheLinkReturns) {
  ClusterOptions options;
  options.num_processes = 3;
  options.devices_per_process = 2;
  auto cluster = Start(options);
  ASSERT_NE(cluster, nullptr);
  NetworkNamespaces& ns = *cluster->namespaces();
  auto c0 = Connect(*cluster, 0);
  auto c1 = Connect(*cluster, 1);
  ASSERT_TRUE(c0 != nullptr && c1 != nullptr);
  auto before = c0->GetStatus();
  ASSERT_TRUE(before.ok());
  const std::string address_2 = before->cluster.processes[2].peer_address;

  // Host 2's cable is pulled: its daemon keeps running, nothing it sends
  // arrives and nothing reaches it.
  const absl::Time cut = absl::Now();
  ASSERT_TRUE(ns.SetLinkUp(2, false).ok());
  auto lost = WaitForStatus(*c0, [](const client::DaemonStatus& s) {
    return ProcessIs(s, 2, client::ProcessState::kLost);
  });
  ASSERT_TRUE(lost.ok()) << lost.status();
  ASSERT_TRUE(ProcessIs(*lost, 2, client::ProcessState::kLost));
  const absl::Duration detected = absl::Now() - cut;
  EXPECT_LT(detected, kDetection + kSlack);
  EXPECT_EQ(lost->cluster.state, client::ClusterState::kDegraded);
  EXPECT_GT(lost->cluster.epoch, before->cluster.epoch);
  auto seen_by_1 = WaitForStatus(*c1, [](const client::DaemonStatus& s) {
    return ProcessIs(s, 2, client::ProcessState::kLost);
  });
  ASSERT_TRUE(seen_by_1.ok());
  EXPECT_TRUE(ProcessIs(*seen_by_1, 2, client::ProcessState::kLost));

  // The cut-off daemon's own view, asked from inside its namespace (the
  // test's namespace cannot reach it now): it lost the coordinator.
  std::vector<std::string> status_in_2 = ns.ExecPrefix(2);
  status_in_2.insert(status_in_2.end(), {PlacectlBinary(), "--json", "--connect_timeout=2s",
                                         "--target=" + cluster->address(2), "status"});
  CommandResult own_view;
  const absl::Time failed_deadline = absl::Now() + absl::Seconds(20);
  do {
    own_view = RunCommand(status_in_2, absl::Seconds(10));
    if (absl::StrContains(own_view.out, "CLUSTER_STATE_FAILED")) break;
    absl::SleepFor(absl::Milliseconds(200));
  } while (absl::Now() < failed_deadline);
  EXPECT_THAT(own_view.out, HasSubstr("CLUSTER_STATE_FAILED")) << own_view.err;
  const absl::Duration failed_after = absl::Now() - cut;

  // The cable goes back in: the dropped daemon joins again by itself, with
  // the same process index and device ids, and the cluster is whole.
  const absl::Time restored = absl::Now();
  ASSERT_TRUE(ns.SetLinkUp(2, true).ok());
  auto back = WaitForStatus(
      *c0,
      [](const client::DaemonStatus& s) {
        return s.cluster.state == client::ClusterState::kFormed;
      },
      absl::Seconds(30));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->cluster.state, client::ClusterState::kFormed) << cluster->daemon(2).Stderr();
  EXPECT_EQ(back->cluster.processes[2].joins, 2);
  EXPECT_EQ(back->cluster.processes[2].peer_address, address_2);
  EXPECT_GT(back->cluster.epoch, lost->cluster.epoch);
  const absl::Duration rejoined = absl::Now() - restored;
  auto c2 = Connect(*cluster, 2);
  ASSERT_NE(c2, nullptr);
  auto own = WaitForStatus(*c2, [](const client::DaemonStatus& s) {
    return s.cluster.state == client::ClusterState::kFormed;
  });
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->cluster.state, client::ClusterState::kFormed) << cluster->daemon(2).Stderr();
  EXPECT_EQ(own->cluster.epoch, back->cluster.epoch);
  auto devices = c2->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 6u);
  EXPECT_EQ((*devices)[4].process_index, 2);
  // The daemon was not restarted: the same process throughout.
  EXPECT_THAT(cluster->daemon(2).Stderr(), HasSubstr("joined again"));
  std::printf(
      "partition: lost after %s on the coordinator, failed after %s on the cut-off "
      "daemon; formed again %s after the link returned\n",
      absl::FormatDuration(detected).c_str(), absl::FormatDuration(failed_after).c_str(),
      absl::FormatDuration(rejoined).c_str());
}

}  // namespace
}  // namespace placement::testing
