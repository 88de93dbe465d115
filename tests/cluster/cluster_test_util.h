// Helpers the cluster tests share: polling a daemon's view of its cluster
// (status, device memory) until a condition holds (bounded), and status
// assertions.
#ifndef PLACEMENT_TESTS_CLUSTER_CLUSTER_TEST_UTIL_H_
#define PLACEMENT_TESTS_CLUSTER_CLUSTER_TEST_UTIL_H_

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/client.h"
#include "placement/client/meshes.h"
#include "placement/client/tensors.h"
#include "placement/v1/collective_service.grpc.pb.h"
#include "tests/testing/cluster_processes.h"
#include "tests/testing/network_namespaces.h"
#include "tests/testing/trainer_call.h"

namespace placement::testing {

// Polls GetStatus on `client` until `pred(status)` or `timeout`; returns the
// last status seen (or the error).
inline absl::StatusOr<client::DaemonStatus> WaitForStatus(
    const client::Client& client, const std::function<bool(const client::DaemonStatus&)>& pred,
    absl::Duration timeout = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<client::DaemonStatus> status = client.GetStatus();
  while (absl::Now() < deadline) {
    status = client.GetStatus();
    if (status.ok() && pred(*status)) return status;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return status;
}

// Bytes in use per device, as daemon `via` reports them, of the devices of
// `processes` (every device when empty), in global id order.
inline std::vector<int64_t> MemoryOf(const client::Client& via,
                                     const std::vector<int32_t>& processes = {}) {
  std::vector<int64_t> out;
  auto devices = via.ListDevices();
  EXPECT_TRUE(devices.ok()) << devices.status();
  if (!devices.ok()) return out;
  for (const auto& d : *devices) {
    if (processes.empty() ||
        std::find(processes.begin(), processes.end(), d.process_index) != processes.end()) {
      out.push_back(d.memory_in_use_bytes);
    }
  }
  return out;
}

// Polls MemoryOf(via, processes) until it equals `baseline` (true) or 30 s
// pass (false).
inline bool MemoryReturns(const client::Client& via, const std::vector<int32_t>& processes,
                          const std::vector<int64_t>& baseline) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (MemoryOf(via, processes) == baseline) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

// One trainer's CollectiveService.AllReduce on the daemon at `address`
// (raw gRPC, so tests can set any field, e.g. controller MULTI) with a
// deadline of `timeout`.
inline grpc::Status AllReduceOn(const std::string& address,
                                const placement::v1::AllReduceRequest& request,
                                placement::v1::CollectiveResponse* response,
                                absl::Duration timeout = absl::Seconds(60)) {
  auto stub = placement::v1::CollectiveService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  PrepareTrainerCall(&context, timeout);
  return stub->AllReduce(&context, request, response);
}

inline bool ProcessIs(const client::DaemonStatus& s, int32_t process, client::ProcessState state) {
  return process < static_cast<int32_t>(s.cluster.processes.size()) &&
         s.cluster.processes[process].state == state;
}

// The shape of a test cluster: processes x CPU devices each, on loopback or
// with each daemon in its own network namespace.
struct ClusterLayout {
  int processes = 2;
  int devices = 4;
  bool namespaces = false;
};

// "2x4", "2x4_netns": parameterized test names.
inline std::string LayoutName(const ::testing::TestParamInfo<ClusterLayout>& info) {
  return absl::StrCat(info.param.processes, "x", info.param.devices,
                      info.param.namespaces ? "_netns" : "");
}

// A started cluster with a client and a TensorClient per daemon and, when
// asked, the meshes "flat" (data = every device) and "grid" (proc x local)
// made through the last daemon. ExpectMemoryAtBaseline deletes what is
// left and checks every device is back where it started.
class ClusterFixture {
 protected:
  // Fatal-fails (or skips: namespaces without root) the calling test.
  // `per_process`: more flags for daemon i (entry i), on top of extra_flags.
  void StartCluster(const ClusterLayout& layout, std::vector<std::string> extra_flags = {},
                    bool meshes = true, std::vector<std::vector<std::string>> per_process = {}) {
    ClusterOptions options;
    options.num_processes = layout.processes;
    options.devices_per_process = layout.devices;
    options.namespaces = layout.namespaces;
    options.extra_flags = std::move(extra_flags);
    options.per_process = std::move(per_process);
    auto cluster = ClusterProcesses::Start(options);
    if (!cluster.ok() && layout.namespaces && !NetworkNamespaces::Usable().ok()) {
      GTEST_SKIP() << "network namespaces cannot be made on this machine ("
                   << NetworkNamespaces::Usable() << "): " << cluster.status();
    }
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    for (int p = 0; p < cluster_->size(); ++p) {
      auto c = cluster_->Connect(p);
      ASSERT_TRUE(c.ok()) << c.status();
      clients_.push_back(*std::move(c));
      tensors_.push_back(std::make_unique<client::TensorClient>(*clients_.back()));
    }
    n_ = layout.processes * layout.devices;
    if (meshes) {
      client::MeshClient m(*clients_.back());
      ASSERT_TRUE(m.Create({{"data", n_}}, {.mesh_id = "flat"}).ok());
      ASSERT_TRUE(
          m.Create({{"proc", layout.processes}, {"local", layout.devices}}, {.mesh_id = "grid"})
              .ok());
    }
    baseline_ = Memory();
  }

  // Bytes in use per device, as daemon 0 reports the whole cluster.
  std::vector<int64_t> Memory() const { return MemoryOf(*clients_[0]); }

  void ExpectMemoryAtBaseline() {
    if (cluster_ == nullptr) return;
    auto left = tensors_[0]->List();
    ASSERT_TRUE(left.ok());
    for (const auto& t : *left) tensors_[0]->Delete({t.id}).IgnoreError();
    EXPECT_EQ(Memory(), baseline_);
  }

  std::unique_ptr<ClusterProcesses> cluster_;
  std::vector<std::unique_ptr<client::Client>> clients_;
  std::vector<std::unique_ptr<client::TensorClient>> tensors_;
  int n_ = 0;
  std::vector<int64_t> baseline_;
};

}  // namespace placement::testing

#endif  // PLACEMENT_TESTS_CLUSTER_CLUSTER_TEST_UTIL_H_
