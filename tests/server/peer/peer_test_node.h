// One daemon's cluster side, assembled as the Daemon does but in the test's
// process, for the unit tests of server/peer/: a CpuBackend, a
// DeviceInventory, the PeerChannels, a Cluster that reaches its coordinator
// through a CoordinatorClient, a ServiceSet (tensor store, cluster tensors,
// meshes, the PeerService handler) and a real gRPC server on 127.0.0.1 port
// 0 with the daemon-to-daemon services -- on node 0 also the Coordinator
// and its ClusterService. Tests call a node's peers through its own
// PeerClient / CoordinatorClient and check what the other nodes hold.
//
// Header-only. Thread-safety: Join may run on several threads (one per
// node); the rest from the test thread.
#ifndef PLACEMENT_TESTS_SERVER_PEER_PEER_TEST_NODE_H_
#define PLACEMENT_TESTS_SERVER_PEER_PEER_TEST_NODE_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/cluster/cluster.h"
#include "server/cluster/coordinator.h"
#include "server/collective/local/local_engine.h"
#include "server/device/device_inventory.h"
#include "server/peer/coordinator_client.h"
#include "server/peer/peer_channels.h"
#include "server/peer/peer_client.h"
#include "server/platform/cpu/cpu_backend.h"
#include "server/service/call_gate.h"
#include "server/service/cluster_handler.h"
#include "server/service_set.h"

namespace placement::server::testing {

inline constexpr int kNodeDevices = 2;

struct PeerTestNode {
  // Node `process` of `num_processes`; `coordinator` is node 0's address
  // ("" on node 0 itself, which coordinates through its own).
  static std::unique_ptr<PeerTestNode> Start(int32_t process, int32_t num_processes,
                                             const std::string& coordinator,
                                             absl::Duration heartbeat = absl::Milliseconds(100)) {
    auto node = std::make_unique<PeerTestNode>();
    CpuBackendOptions cpu;
    cpu.num_devices = kNodeDevices;
    cpu.device_memory_bytes = 8 << 20;
    cpu.process_index = process;
    node->backend = std::move(CpuBackend::Create(cpu)).value();
    node->inventory = std::make_unique<DeviceInventory>(node->backend.get());
    node->channels = std::make_unique<PeerChannels>(PeerSecurity{});
    ClusterConfig config;
    config.coordinator = coordinator;
    config.process_index = process;
    config.num_processes = num_processes;
    config.init_timeout = absl::Seconds(30);
    config.heartbeat_interval = heartbeat;
    config.heartbeat_misses = 5;
    config.op_timeout = absl::Seconds(10);
    PeerChannels* channels = node->channels.get();
    node->cluster = std::make_unique<Cluster>(config, [channels](const std::string& address) {
      return std::make_unique<CoordinatorClient>(channels, address);
    });
    if (process == 0) {
      MembershipOptions membership;
      membership.num_processes = num_processes;
      membership.coordinator_instance_id = "coordinator-0";
      membership.heartbeat_interval = heartbeat;
      membership.heartbeat_misses = 5;
      node->coordinator = std::make_unique<Coordinator>(membership);
      node->cluster_handler =
          std::make_unique<ClusterHandler>(node->coordinator.get(), &node->gate);
    }
    ServiceSetOptions options;
    options.cluster = node->cluster.get();
    options.peer_channels = channels;
    options.peer_gate = &node->gate;
    node->services =
        std::move(ServiceSet::Create(node->inventory.get(), std::make_unique<LocalEngine>(),
                                     &node->gate, nullptr, options))
            .value();
    if (node->cluster_handler) node->cluster_handler->set_meshes(node->services->mesh_authority());
    grpc::ServerBuilder builder;
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &node->port);
    node->services->RegisterPeer(&builder);
    if (node->cluster_handler) builder.RegisterService(node->cluster_handler.get());
    node->server = builder.BuildAndStart();
    EXPECT_NE(node->server, nullptr);
    node->address = absl::StrCat("127.0.0.1:", node->port);
    node->cluster->SetAddresses(node->address, "127.0.0.1");
    node->client = std::make_unique<PeerClient>(channels, node->cluster.get());
    return node;
  }

  // Joins (blocks until every node joined), takes the global ids, attaches
  // the services and starts heartbeats.
  absl::Status Join() {
    absl::StatusOr<std::shared_ptr<const ClusterView>> view =
        cluster->Join(backend->Devices(), absl::StrCat("instance-", cluster->process_index()));
    if (!view.ok()) return view.status();
    const ProcessRecord& self = (*view)->processes[cluster->process_index()];
    if (absl::Status s = backend->AssignGlobalIds(self.first_device_id, cluster->process_index());
        !s.ok()) {
      return s;
    }
    if (absl::Status s = services->AttachCluster(**view); !s.ok()) return s;
    cluster->StartHeartbeats();
    return absl::OkStatus();
  }

  // Stops serving at once: to the others this node is gone.
  void Stop() {
    if (coordinator) coordinator->Shutdown();
    if (server) server->Shutdown(absl::ToChronoTime(absl::Now()));
  }

  ~PeerTestNode() {
    services->StartShutdown();
    Stop();
    if (server) server->Wait();
  }

  CallGate gate;
  std::unique_ptr<CpuBackend> backend;
  std::unique_ptr<DeviceInventory> inventory;
  std::unique_ptr<PeerChannels> channels;
  std::unique_ptr<Cluster> cluster;
  std::unique_ptr<Coordinator> coordinator;
  std::unique_ptr<ClusterHandler> cluster_handler;
  std::unique_ptr<ServiceSet> services;
  std::unique_ptr<PeerClient> client;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string address;
};

// Starts `n` nodes on loopback, beating every `heartbeat`, and joins them
// all (each Join on a thread of its own: a join returns once every node
// joined).
inline std::vector<std::unique_ptr<PeerTestNode>> StartNodes(
    int n, absl::Duration heartbeat = absl::Milliseconds(100)) {
  std::vector<std::unique_ptr<PeerTestNode>> nodes;
  nodes.push_back(PeerTestNode::Start(0, n, "", heartbeat));
  for (int p = 1; p < n; ++p) {
    nodes.push_back(PeerTestNode::Start(p, n, nodes[0]->address, heartbeat));
  }
  std::vector<absl::Status> joined(n);
  std::vector<std::thread> threads;
  for (int p = 0; p < n; ++p) threads.emplace_back([&, p] { joined[p] = nodes[p]->Join(); });
  for (auto& t : threads) t.join();
  for (int p = 0; p < n; ++p) EXPECT_TRUE(joined[p].ok()) << "node " << p << ": " << joined[p];
  return nodes;
}

}  // namespace placement::server::testing

#endif  // PLACEMENT_TESTS_SERVER_PEER_PEER_TEST_NODE_H_
