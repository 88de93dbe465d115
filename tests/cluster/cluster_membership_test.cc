// Cluster formation and membership with real daemons on loopback: dense
// global device ids on every daemon, GetStatus membership, serving only
// after formation, the refusals (duplicate / out-of-range index, a size
// mismatch, init timeout), loss detection, restart and rejoin, coordinator
// loss and return, and meshes that are the same on every daemon.
#include <csignal>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/meshes.h"
#include "tests/cluster/cluster_test_util.h"

namespace placement::testing {
namespace {

using ::testing::HasSubstr;

TEST(ClusterMembershipTest, FourDaemonsListEveryDeviceWithDenseIds) {
  ClusterOptions options;
  options.num_processes = 4;
  options.devices_per_process = 2;
  // Different device counts per process: ids stay dense in process order.
  options.per_process = {{}, {"--cpu_devices=3"}, {}, {"--cpu_devices=1"}};
  auto cluster = ClusterProcesses::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::vector<int32_t> expected_process = {0, 0, 1, 1, 1, 2, 2, 3};
  for (int d = 0; d < 4; ++d) {
    auto client = (*cluster)->Connect(d);
    ASSERT_TRUE(client.ok());
    auto devices = (*client)->ListDevices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    ASSERT_EQ(devices->size(), 8u) << "daemon " << d;
    for (size_t i = 0; i < devices->size(); ++i) {
      EXPECT_EQ((*devices)[i].id, static_cast<int64_t>(i));
      EXPECT_EQ((*devices)[i].process_index, expected_process[i]);
    }
    auto status = (*client)->GetStatus();
    ASSERT_TRUE(status.ok());
    EXPECT_EQ(status->process_index, d);
    EXPECT_EQ(status->num_devices, 8);
    EXPECT_EQ(status->cluster.state, client::ClusterState::kFormed)
        << (*cluster)->daemon(d).Stderr();
    EXPECT_GE(status->cluster.epoch, 1);
    ASSERT_EQ(status->cluster.processes.size(), 4u);
    EXPECT_EQ(status->cluster.processes[1].first_device_id, 2);
    EXPECT_EQ(status->cluster.processes[1].num_devices, 3);
    for (const auto& p : status->cluster.processes) {
      EXPECT_EQ(p.state, client::ProcessState::kAlive);
    }
  }
}

TEST(ClusterMembershipTest, ServesOnlyOnceEveryProcessJoined) {
  const std::string coordinator = absl::StrCat("127.0.0.1:", PickFreePort());
  DaemonOptions one;
  one.extra_flags = {"--cpu_devices=2", "--num_processes=2", "--process_index=1",
                     "--coordinator=" + coordinator, "--heartbeat_interval=250ms"};
  auto p1 = DaemonProcess::Launch(one);
  ASSERT_TRUE(p1.ok());
  // Without process 0 nothing forms: process 1 is not ready.
  EXPECT_FALSE((*p1)->WaitReady(absl::Seconds(1)).ok());
  DaemonOptions zero = one;
  zero.extra_flags = {"--cpu_devices=2", "--num_processes=2", "--process_index=0",
                      "--coordinator=" + coordinator, "--heartbeat_interval=250ms"};
  auto p0 = DaemonProcess::Launch(zero);
  ASSERT_TRUE(p0.ok());
  ASSERT_TRUE((*p0)->WaitReady(absl::Seconds(30)).ok()) << (*p0)->Stderr();
  ASSERT_TRUE((*p1)->WaitReady(absl::Seconds(30)).ok()) << (*p1)->Stderr();
  EXPECT_EQ((*p0)->ReadyValue("peer"), coordinator);
}

TEST(ClusterMembershipTest, InitTimeoutExitsNamingTheMissingProcesses) {
  DaemonOptions options;
  options.extra_flags = {"--cpu_devices=1", "--num_processes=3", "--process_index=0",
                         absl::StrCat("--coordinator=127.0.0.1:", PickFreePort()),
                         "--cluster_init_timeout=1s"};
  auto d = DaemonProcess::Launch(options);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->WaitExit(absl::Seconds(30)), 1);
  EXPECT_THAT((*d)->Stderr(), HasSubstr("did not form within 1s"));
  EXPECT_THAT((*d)->Stderr(), HasSubstr("process_index 1, 2"));
}

TEST(ClusterMembershipTest, RefusesBadIndicesAndSizes) {
  ClusterOptions options;
  options.devices_per_process = 1;
  auto cluster = ClusterProcesses::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string coordinator = (*cluster)->coordinator();

  DaemonOptions duplicate;
  duplicate.extra_flags = {"--cpu_devices=1", "--num_processes=2", "--process_index=1",
                           "--coordinator=" + coordinator, "--cluster_init_timeout=5s"};
  auto dup = DaemonProcess::Launch(duplicate);
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ((*dup)->WaitExit(absl::Seconds(30)), 1);
  EXPECT_THAT((*dup)->Stderr(), HasSubstr("process_index 1 is already held by a live daemon"));

  DaemonOptions mismatch = duplicate;
  mismatch.extra_flags[1] = "--num_processes=3";
  mismatch.extra_flags[2] = "--process_index=2";
  auto bad_size = DaemonProcess::Launch(mismatch);
  ASSERT_TRUE(bad_size.ok());
  EXPECT_NE((*bad_size)->WaitExit(absl::Seconds(30)), 0);
  EXPECT_THAT((*bad_size)->Stderr(), HasSubstr("--num_processes=3 but the coordinator has "
                                               "--num_processes=2"));

  DaemonOptions out_of_range = duplicate;
  out_of_range.extra_flags[2] = "--process_index=2";
  auto range = DaemonProcess::Launch(out_of_range);
  ASSERT_TRUE(range.ok());
  EXPECT_EQ((*range)->WaitExit(absl::Seconds(30)), 2);
  EXPECT_THAT((*range)->Stderr(), HasSubstr("--process_index=2 is outside [0, 2)"));

  // The cluster is unharmed.
  auto client = (*cluster)->Connect(1);
  ASSERT_TRUE(client.ok());
  auto status = (*client)->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->cluster.state, client::ClusterState::kFormed);
}

TEST(ClusterMembershipTest, LostProcessIsDetectedAndRejoins) {
  ClusterOptions options;
  options.num_processes = 3;
  options.devices_per_process = 2;
  auto cluster = ClusterProcesses::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto c0 = (*cluster)->Connect(0);
  ASSERT_TRUE(c0.ok());
  auto before = (*c0)->GetStatus();
  ASSERT_TRUE(before.ok());

  const absl::Time killed = absl::Now();
  (*cluster)->Kill(2);
  auto lost = WaitForStatus(**c0, [](const client::DaemonStatus& s) {
    return ProcessIs(s, 2, client::ProcessState::kLost);
  });
  ASSERT_TRUE(lost.ok());
  ASSERT_TRUE(ProcessIs(*lost, 2, client::ProcessState::kLost));
  // Detected within heartbeat_interval x misses (2 s) plus a sweep and a
  // beat of slack.
  EXPECT_LT(absl::Now() - killed, absl::Seconds(5));
  EXPECT_EQ(lost->cluster.state, client::ClusterState::kDegraded);
  EXPECT_GT(lost->cluster.epoch, before->cluster.epoch);
  // Another daemon learns it too.
  auto c1 = (*cluster)->Connect(1);
  ASSERT_TRUE(c1.ok());
  EXPECT_TRUE(ProcessIs(*WaitForStatus(**c1,
                                       [](const client::DaemonStatus& s) {
                                         return ProcessIs(s, 2, client::ProcessState::kLost);
                                       }),
                        2, client::ProcessState::kLost));

  ASSERT_TRUE((*cluster)->Restart(2).ok()) << (*cluster)->daemon(2).Stderr();
  auto back = WaitForStatus(**c0, [](const client::DaemonStatus& s) {
    return s.cluster.state == client::ClusterState::kFormed;
  });
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->cluster.state, client::ClusterState::kFormed);
  EXPECT_EQ(back->cluster.processes[2].joins, 2);
  auto c2 = (*cluster)->Connect(2);
  ASSERT_TRUE(c2.ok());
  auto devices = (*c2)->ListDevices();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 6u);
  EXPECT_EQ((*devices)[4].id, 4);
  EXPECT_EQ((*devices)[4].process_index, 2);
}

TEST(ClusterMembershipTest, CoordinatorLossFailsTheClusterUntilItReturns) {
  ClusterOptions options;
  options.devices_per_process = 1;
  auto cluster = ClusterProcesses::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto c1 = (*cluster)->Connect(1);
  ASSERT_TRUE(c1.ok());
  (*cluster)->Kill(0);
  auto failed = WaitForStatus(**c1, [](const client::DaemonStatus& s) {
    return s.cluster.state == client::ClusterState::kFailed;
  });
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->cluster.state, client::ClusterState::kFailed);
  ASSERT_TRUE((*cluster)->Restart(0).ok()) << (*cluster)->daemon(0).Stderr();
  auto formed = WaitForStatus(**c1, [](const client::DaemonStatus& s) {
    return s.cluster.state == client::ClusterState::kFormed;
  });
  ASSERT_TRUE(formed.ok());
  EXPECT_EQ(formed->cluster.state, client::ClusterState::kFormed);
}

TEST(ClusterMembershipTest, MeshesAreTheSameOnEveryDaemon) {
  ClusterOptions options;
  options.num_processes = 2;
  auto cluster = ClusterProcesses::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto c0 = (*cluster)->Connect(0);
  auto c1 = (*cluster)->Connect(1);
  ASSERT_TRUE(c0.ok() && c1.ok());
  client::MeshClient m0(**c0), m1(**c1);
  // Created on daemon 1 with devices of both, in a chosen order.
  client::CreateMeshOptions explicit_devices;
  explicit_devices.mesh_id = "global";
  explicit_devices.device_ids = {4, 0, 5, 1, 6, 2, 7, 3};
  auto mesh = m1.Create({{"data", 2}, {"model", 4}}, explicit_devices);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  auto seen = m0.Get("global");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->mesh.device_ids, mesh->device_ids);
  // A generated id is one id cluster-wide, and the preset spans all 8.
  auto dp = m0.CreateDataParallel();
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ(dp->total_devices, 8);
  auto dp_on_1 = m1.Get(dp->id);
  ASSERT_TRUE(dp_on_1.ok());
  EXPECT_EQ(dp_on_1->mesh.device_ids, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  // Same id twice: ALREADY_EXISTS from either daemon.
  auto twice = m0.Create({{"data", 8}}, explicit_devices);
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kAlreadyExists);
  // Too many devices names the cluster's count.
  auto big = m1.Create({{"data", 16}});
  EXPECT_THAT(big.status().message(), HasSubstr("only 8 available"));
  ASSERT_TRUE(m0.Delete("global").ok());
  EXPECT_EQ(m1.Get("global").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace placement::testing
