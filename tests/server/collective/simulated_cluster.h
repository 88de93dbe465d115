// A cluster of P simulated processes in one test process, for the tests of
// ClusterEngine and of the cross-process transports under it: per "process"
// a CpuBackend (its own process_index, so device ids differ), a LocalEngine,
// a CrossProcessTransport (by registered name; "gloo" by default) and a
// ClusterEngine, one shared RendezvousStore; helpers that run each process's
// call on its own thread, build items whose ranks are spread over
// processes, and check results against float64 / exact integer references
// (collective_test_util.h). Real transports over loopback TCP.
//
// Header-only; the named transport must be registered (TransportRegistry).
// Thread-safety: a SimulatedCluster is used from the test thread and the
// threads OnProcesses starts.
#ifndef PLACEMENT_TESTS_SERVER_COLLECTIVE_SIMULATED_CLUSTER_H_
#define PLACEMENT_TESTS_SERVER_COLLECTIVE_SIMULATED_CLUSTER_H_

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "server/collective/cluster/cluster_engine.h"
#include "server/collective/local/local_engine.h"
#include "server/collective/transport/rendezvous_store.h"
#include "server/collective/transport/transport_registry.h"
#include "server/platform/cpu/cpu_backend.h"
#include "tests/server/collective/collective_test_util.h"

namespace placement::server::testing {

// As placementd's main does: a "process" whose peer closed its Gloo
// connections mid-call must see the write fail (EPIPE), not be killed by
// SIGPIPE -- the simulated processes share one test binary. Every binary
// that includes this header ignores it.
inline const bool kSigpipeIgnored = [] {
  signal(SIGPIPE, SIG_IGN);
  return true;
}();

inline constexpr int kDevicesPerProcess = 4;

// A backend that is not host-addressable (like a GPU's) over a CpuBackend:
// the engine must stage through Read / Write, which are counted.
class StagedBackend final : public DeviceBackend {
 public:
  explicit StagedBackend(DeviceBackend* inner) : inner_(inner) {}
  absl::string_view Name() const override { return "staged"; }
  const std::vector<DeviceDescription>& Devices() const override { return inner_->Devices(); }
  int64_t MemoryInUse(int64_t device_id) const override { return inner_->MemoryInUse(device_id); }
  bool HostAddressable() const override { return false; }
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(int64_t device_id,
                                                         int64_t bytes) override {
    return inner_->Allocate(device_id, bytes);  // the buffers belong to `inner`
  }
  absl::Status Write(const void* src, DeviceBuffer& dst, absl::Span<const ByteRun> runs) override {
    writes_.fetch_add(1);
    return inner_->Write(src, dst, runs);
  }
  absl::Status Read(const DeviceBuffer& src, void* dst, absl::Span<const ByteRun> runs) override {
    reads_.fetch_add(1);
    return inner_->Read(src, dst, runs);
  }
  absl::Status Copy(const DeviceBuffer& src, DeviceBuffer& dst,
                    absl::Span<const ByteRun> runs) override {
    return inner_->Copy(src, dst, runs);
  }
  int reads() const { return reads_.load(); }
  int writes() const { return writes_.load(); }

 protected:
  void Release(int64_t, void*, int64_t, MemoryOwnerTag) override {}  // never called: see Allocate

 private:
  DeviceBackend* inner_;
  std::atomic<int> reads_{0};
  std::atomic<int> writes_{0};
};

struct ClusterOptions {
  int processes = 2;
  absl::Duration timeout = absl::Seconds(10);
  absl::Duration gap_timeout = absl::Seconds(10);
  bool staged = false;
  // The registered transport every process uses, and the store they meet
  // through (null: the cluster's own InMemoryRendezvousStore).
  std::string transport = "gloo";
  RendezvousStore* store = nullptr;
  // ClusterEngineOptions::check_calls.
  bool check_calls = false;
};

struct Failure {
  int process = 0;
  uint64_t ticket = 0;
  absl::StatusCode code = absl::StatusCode::kOk;
};

// P "processes" of one cluster.
class SimulatedCluster {
 public:
  explicit SimulatedCluster(const ClusterOptions& options) : options_(options) {
    const int n = options.processes;
    for (int p = 0; p < n; ++p) {
      CpuBackendOptions cpu;
      cpu.num_devices = kDevicesPerProcess;
      cpu.device_memory_bytes = 16 << 20;
      cpu.process_index = p;
      backends_.push_back(*CpuBackend::Create(cpu));
      staged_.push_back(std::make_unique<StagedBackend>(backends_[p].get()));
      LocalEngineOptions local;
      local.num_threads = 0;
      locals_.push_back(std::make_unique<LocalEngine>(local));
      CrossProcessTransportOptions t;
      t.store = options.store != nullptr ? options.store : &store_;
      t.backend = options.staged ? static_cast<DeviceBackend*>(staged_[p].get())
                                 : static_cast<DeviceBackend*>(backends_[p].get());
      t.process_index = p;
      auto transport = TransportRegistry::Global().Create(options.transport, t);
      EXPECT_TRUE(transport.ok()) << transport.status();
      transports_.push_back(transport.ok() ? std::move(*transport) : nullptr);
      ClusterEngineOptions o;
      o.local = locals_[p].get();
      o.transport = transports_[p].get();
      o.process_index = p;
      o.process_of = [n](int64_t id) -> int32_t {
        const int64_t p = id / kMaxLocalDevices;
        return id >= 0 && p < n ? static_cast<int32_t>(p) : -1;
      };
      o.timeout = options.timeout;
      o.gap_timeout = options.gap_timeout;
      o.check_calls = options.check_calls;
      o.store = t.store;
      o.on_failure = [this, p](const CrossProcessTicket& t, const absl::Status& s) {
        absl::MutexLock lock(&mu_);
        failures_.push_back(Failure{p, t.ticket, s.code()});
      };
      auto engine = ClusterEngine::Create(o);
      EXPECT_TRUE(engine.ok()) << engine.status();
      engines_.push_back(std::move(*engine));
    }
  }

  int size() const { return options_.processes; }
  ClusterEngine& engine(int p) { return *engines_[p]; }
  CrossProcessTransport& transport(int p) { return *transports_[p]; }
  StagedBackend& staged(int p) { return *staged_[p]; }
  // Process p dies: its transport closes every connection.
  void Kill(int p) {
    engines_[p].reset();
    transports_[p].reset();
  }
  int64_t Device(int p, int local) const { return p * kMaxLocalDevices + local; }
  // Every process's index joined by commas: the set of all processes.
  std::string AllKey() const {
    std::vector<int> all;
    for (int p = 0; p < size(); ++p) all.push_back(p);
    return absl::StrJoin(all, ",");
  }

  std::unique_ptr<DeviceBuffer> Buffer(int64_t device, DType dtype,
                                       const std::vector<double>& values) {
    std::unique_ptr<DeviceBuffer> b =
        *backends_[device / kMaxLocalDevices]->Allocate(device, values.size() * DTypeSize(dtype));
    std::vector<std::byte> bytes = Encode(dtype, values);
    if (!bytes.empty()) std::memcpy(b->data(), bytes.data(), bytes.size());
    return b;
  }
  // Filled with 0xAB so bytes the engine forgets to write show up.
  std::unique_ptr<DeviceBuffer> Garbage(int64_t device, int64_t bytes) {
    std::unique_ptr<DeviceBuffer> b =
        *backends_[device / kMaxLocalDevices]->Allocate(device, bytes);
    if (bytes > 0) std::memset(b->data(), 0xAB, static_cast<size_t>(bytes));
    return b;
  }

  std::vector<Failure> failures() {
    absl::MutexLock lock(&mu_);
    return failures_;
  }

 private:
  ClusterOptions options_;
  std::vector<std::unique_ptr<CpuBackend>> backends_;
  std::vector<std::unique_ptr<StagedBackend>> staged_;
  std::vector<std::unique_ptr<LocalEngine>> locals_;
  InMemoryRendezvousStore store_;
  absl::Mutex mu_;
  std::vector<Failure> failures_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<CrossProcessTransport>> transports_;
  std::vector<std::unique_ptr<ClusterEngine>> engines_;  // destroyed first
};

// Runs fn(p) for every p of `processes` at once, each on its own thread.
inline std::vector<absl::Status> OnProcesses(const std::vector<int>& processes,
                                             const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> statuses(processes.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < processes.size(); ++i) {
    threads.emplace_back([&, i] { statuses[i] = fn(processes[i]); });
  }
  for (auto& t : threads) t.join();
  return statuses;
}

inline std::vector<int> AllProcesses(const SimulatedCluster& c) {
  std::vector<int> all;
  for (int p = 0; p < c.size(); ++p) all.push_back(p);
  return all;
}

inline CrossProcessTicket Ticket(std::string set_key, uint64_t ticket, uint64_t generation = 0,
                                 uint64_t epoch = 0) {
  return CrossProcessTicket{std::move(set_key), epoch, generation, ticket};
}

// Fires once, the first time the engine polls `cancelled`: the call is then
// waiting for its turn or about to start its first Gloo operation.
class PollHook {
 public:
  std::function<bool()> Fn() {
    return [this] {
      if (!fired_.exchange(true)) reached_.Notify();
      return false;
    };
  }
  bool WaitReached() { return reached_.WaitForNotificationWithTimeout(absl::Seconds(20)); }

 private:
  std::atomic<bool> fired_{false};
  absl::Notification reached_;
};

// One item's ranks and buffers: rank r lives on process layout[r].
struct Group {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  int32_t root = 0;
  int64_t count = 0;  // elements per block
  std::vector<int> layout;
  std::vector<int64_t> devices;
  std::vector<std::vector<double>> values;  // what each rank sends
  std::vector<std::unique_ptr<DeviceBuffer>> send, recv;

  int64_t ranks() const { return static_cast<int64_t>(layout.size()); }
  bool Involves(int process) const {
    return std::find(layout.begin(), layout.end(), process) != layout.end();
  }
};

inline Group MakeGroup(SimulatedCluster& c, CollectiveKind kind, DType dtype, ReduceOp op,
                       std::vector<int> layout, int64_t count, int32_t root, uint32_t seed) {
  Group g;
  g.kind = kind;
  g.dtype = dtype;
  g.op = op;
  g.root = root;
  g.count = count;
  g.layout = std::move(layout);
  const int64_t n = g.ranks();
  std::vector<int> next_local(c.size(), 0);
  for (int64_t r = 0; r < n; ++r) {
    const int p = g.layout[r];
    const int64_t device = c.Device(p, next_local[p]++);
    g.devices.push_back(device);
    const int64_t send_elems = kind == CollectiveKind::kReduceScatter ? n * count : count;
    const int64_t recv_elems = kind == CollectiveKind::kAllGather ? n * count : count;
    g.values.push_back(TestValues(dtype, send_elems, seed + static_cast<uint32_t>(r)));
    const bool sends = kind != CollectiveKind::kBroadcast || r == root;
    g.send.push_back(sends ? c.Buffer(device, dtype, g.values[r]) : nullptr);
    g.recv.push_back(c.Garbage(device, recv_elems * DTypeSize(dtype)));
  }
  return g;
}

// Process `process`'s view of the group: every rank, its own contributions.
inline CollectiveItem ItemFor(const Group& g, int process) {
  CollectiveItem item{g.dtype, g.op};
  item.root = g.root;
  item.group = g.devices;
  for (int64_t r = 0; r < g.ranks(); ++r) {
    if (g.layout[r] != process) continue;
    item.local.push_back(RankBuffers{static_cast<int32_t>(r), g.send[r].get(), g.recv[r].get()});
  }
  return item;
}

// The items of `groups` that `process` holds ranks of, in order.
inline std::vector<CollectiveItem> ItemsFor(const std::vector<Group>& groups, int process) {
  std::vector<CollectiveItem> items;
  for (const Group& g : groups) {
    if (g.Involves(process)) items.push_back(ItemFor(g, process));
  }
  return items;
}

// Runs `g` (its kind) with `ticket` on every process of `processes` at
// once, each with its own item; their statuses, in `processes` order.
inline std::vector<absl::Status> RunGroup(SimulatedCluster& c, const Group& g,
                                          const std::vector<int>& processes,
                                          const CrossProcessTicket& ticket) {
  return OnProcesses(processes, [&](int p) {
    CollectiveItem item = ItemFor(g, p);
    CollectiveContext context;
    context.ticket = &ticket;
    return c.engine(p).Run(g.kind, {&item, 1}, context);
  });
}

inline std::string Label(const Group& g) {
  return absl::StrCat(CollectiveKindName(g.kind), " ", DTypeName(g.dtype), " ", ReduceOpName(g.op),
                      " layout {", absl::StrJoin(g.layout, ","), "} root ", g.root, " count ",
                      g.count);
}

// Checks every rank's recv against the float64 / exact integer reference.
inline void ExpectResult(const Group& g) {
  const int64_t n = g.ranks();
  for (int64_t r = 0; r < n; ++r) {
    const int64_t recv_elems = g.kind == CollectiveKind::kAllGather ? n * g.count : g.count;
    const std::vector<double> got = Decode(g.dtype, g.recv[r]->data(), recv_elems);
    for (int64_t i = 0; i < recv_elems; ++i) {
      double want = 0;
      switch (g.kind) {
        case CollectiveKind::kAllReduce:
        case CollectiveKind::kReduceScatter: {
          const int64_t at = g.kind == CollectiveKind::kAllReduce ? i : r * g.count + i;
          std::vector<double> column;
          for (int64_t q = 0; q < n; ++q) column.push_back(g.values[q][at]);
          want = Reference(g.dtype, g.op, column);
          break;
        }
        case CollectiveKind::kAllGather:
          want = g.values[i / g.count][i % g.count];
          break;
        case CollectiveKind::kBroadcast:
          want = g.values[g.root][i];
          break;
      }
      if (!Near(g.dtype, got[i], want)) {
        ADD_FAILURE() << Label(g) << ": rank " << r << " element " << i << " is " << got[i]
                      << ", expected " << want;
        return;
      }
    }
  }
}

}  // namespace placement::server::testing

#endif  // PLACEMENT_TESTS_SERVER_COLLECTIVE_SIMULATED_CLUSTER_H_
