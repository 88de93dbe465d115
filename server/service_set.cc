#include "server/service_set.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/cluster/cluster.h"
#include "server/cluster/cluster_collectives.h"
#include "server/cluster/cluster_data.h"
#include "server/cluster/cluster_meshes.h"
#include "server/cluster/cluster_ops.h"
#include "server/cluster/cluster_tensors.h"
#include "server/cluster/fan_out.h"
#include "server/collective/cluster/cluster_engine.h"
#include "server/collective/collective_service_core.h"
#include "server/collective/transport/transport_registry.h"
#include "server/common/worker_pool.h"
#include "server/logging.h"
#include "server/mesh/mesh_registry.h"
#include "server/peer/peer_client.h"
#include "server/prefetch/prefetch_manager.h"
#include "server/service/collective_handler.h"
#include "server/service/mesh_handler.h"
#include "server/service/peer_handler.h"
#include "server/service/prefetch_handler.h"
#include "server/service/region_handler.h"
#include "server/service/session_handler.h"
#include "server/service/tensor_handler.h"
#include "server/service/view_handler.h"
#include "server/tensor/tenant_metrics.h"
#include "server/tensor/tensor_ops.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

namespace {

// Scrape-time gauges for meshes and tensors.
void AddMeshAndTensorMetrics(Metrics* metrics, MeshRegistry* meshes, TensorStore* tensors) {
  if (metrics == nullptr) return;
  metrics->Describe("placementd_meshes", "gauge", "Registered meshes.");
  metrics->Describe("placementd_tensors", "gauge", "Tensors held by the daemon.");
  metrics->Describe("placementd_tensor_device_bytes", "gauge",
                    "Device bytes held by tensors, over all shards.");
  metrics->AddCollector([meshes, tensors](std::vector<GaugeSample>* out) {
    // Aggregates only: holding references to tensors here would make a
    // concurrent donation (in-place collective) fail as "in use".
    out->push_back({"placementd_meshes", {}, static_cast<double>(meshes->size())});
    out->push_back({"placementd_tensors", {}, static_cast<double>(tensors->size())});
    out->push_back(
        {"placementd_tensor_device_bytes", {}, static_cast<double>(tensors->TotalDeviceBytes())});
  });
}

void AddSessionMetrics(Metrics* metrics, SessionManager* sessions) {
  metrics->Describe("placementd_sessions", "gauge", "Open sessions (SessionService).");
  metrics->Describe("placementd_session_tensors", "gauge",
                    "Tensors held by open sessions (freed when a session ends or expires).");
  metrics->AddCollector([sessions](std::vector<GaugeSample>* out) {
    out->push_back({"placementd_sessions", {}, static_cast<double>(sessions->size())});
    out->push_back(
        {"placementd_session_tensors", {}, static_cast<double>(sessions->tensor_count())});
  });
}

void AddRegionMetrics(Metrics* metrics, RegionRegistry* regions) {
  metrics->Describe("placementd_regions", "gauge", "Shared-memory regions registered now.");
  metrics->Describe("placementd_region_mapped_bytes", "gauge",
                    "Bytes of client shared memory the daemon maps now.");
  metrics->AddCollector([regions](std::vector<GaugeSample>* out) {
    out->push_back({"placementd_regions", {}, static_cast<double>(regions->size())});
    out->push_back(
        {"placementd_region_mapped_bytes", {}, static_cast<double>(regions->mapped_bytes())});
  });
}

void AddUploadReservationMetrics(Metrics* metrics, UploadReservations* uploads) {
  metrics->Describe("placementd_upload_reservations_open", "gauge",
                    "Uploads written in place (ViewService.ReserveUpload) not yet committed, "
                    "cancelled or expired.");
  metrics->Describe("placementd_upload_reservation_bytes_open", "gauge",
                    "Device bytes the open upload reservations hold.");
  metrics->Describe("placementd_upload_reservations_ended_total", "counter",
                    "Upload reservations ended, by reason: committed, cancelled (or a failed "
                    "commit), writer_exited (the process that redeemed it), expired.");
  metrics->Describe("placementd_inplace_upload_bytes_total", "counter",
                    "Tensor bytes committed after a client wrote them in place.");
  metrics->AddCollector([uploads](std::vector<GaugeSample>* out) {
    const UploadReservations::Counts counts = uploads->counts();
    const char* kEnded = "placementd_upload_reservations_ended_total";
    out->push_back(
        {"placementd_upload_reservations_open", {}, static_cast<double>(uploads->size())});
    out->push_back({"placementd_upload_reservation_bytes_open",
                    {},
                    static_cast<double>(uploads->open_bytes())});
    out->push_back({kEnded, {{"reason", "committed"}}, static_cast<double>(counts.committed)});
    out->push_back({kEnded, {{"reason", "cancelled"}}, static_cast<double>(counts.cancelled)});
    out->push_back(
        {kEnded, {{"reason", "writer_exited"}}, static_cast<double>(counts.writer_exited)});
    out->push_back({kEnded, {{"reason", "expired"}}, static_cast<double>(counts.expired)});
    out->push_back(
        {"placementd_inplace_upload_bytes_total", {}, static_cast<double>(counts.committed_bytes)});
  });
}

void AddViewMetrics(Metrics* metrics, ExportRegistry* exports) {
  metrics->Describe("placementd_exports_open", "gauge",
                    "Shard exports (views) open now (ViewService).");
  metrics->Describe("placementd_export_bytes_open", "gauge",
                    "Shard bytes open exports expose (held and counted while exported).");
  metrics->AddCollector([exports](std::vector<GaugeSample>* out) {
    out->push_back({"placementd_exports_open", {}, static_cast<double>(exports->size())});
    out->push_back(
        {"placementd_export_bytes_open", {}, static_cast<double>(exports->open_bytes())});
  });
}

void AddClusterMetrics(Metrics* metrics, Cluster* cluster, ClusterTensors* pending) {
  metrics->Describe("placementd_cluster_epoch", "gauge",
                    "Membership epoch of this daemon's cluster (advances on every change).");
  metrics->Describe("placementd_cluster_processes", "gauge",
                    "Daemons of the cluster by state (joining, alive, lost).");
  metrics->Describe("placementd_cluster_state", "gauge",
                    "1 for the cluster's state as this daemon sees it (forming, formed, "
                    "degraded, failed), 0 for the others.");
  metrics->Describe("placementd_cluster_pending_tensors", "gauge",
                    "Tensor parts prepared here for an operation another daemon drives, not "
                    "yet committed.");
  metrics->AddCollector([cluster, pending](std::vector<GaugeSample>* out) {
    std::shared_ptr<const ClusterView> view = cluster->view();
    out->push_back({"placementd_cluster_epoch", {}, static_cast<double>(view->epoch)});
    for (ClusterState state : {ClusterState::kForming, ClusterState::kFormed,
                               ClusterState::kDegraded, ClusterState::kFailed}) {
      out->push_back({"placementd_cluster_state",
                      {{"state", std::string(ClusterStateName(state))}},
                      view->state == state ? 1.0 : 0.0});
    }
    for (ProcessState state :
         {ProcessState::kJoining, ProcessState::kAlive, ProcessState::kLost, ProcessState::kLeft}) {
      double n = 0;
      for (const ProcessRecord& p : view->processes) n += p.state == state ? 1 : 0;
      out->push_back(
          {"placementd_cluster_processes", {{"state", std::string(ProcessStateName(state))}}, n});
    }
    out->push_back(
        {"placementd_cluster_pending_tensors", {}, static_cast<double>(pending->pending_count())});
  });
}

}  // namespace

// Components first, handlers after them: members are destroyed in reverse
// order, so handlers go before the components they call. Each data-plane
// family adds its block here (component, handler, registration, counts).
struct ServiceSet::Impl {
  DeviceInventory* inventory = nullptr;
  CallGate* gate = nullptr;
  Metrics* metrics = nullptr;
  ServiceSetOptions options;

  // Shard exports: declared before the fd-passing socket that redeems their
  // tokens, so the socket stops first; they hold tensors, not the store.
  std::unique_ptr<ExportRegistry> export_registry;
  std::unique_ptr<UploadReservations> upload_reservations;

  // Shared-memory regions (first: the transfer handlers below use them).
  std::unique_ptr<FdPassingListener> fd_listener;
  std::unique_ptr<RegionRegistry> region_registry;
  std::unique_ptr<RegionHandler> region_handler;

  // Meshes and tensors.
  std::unique_ptr<MeshRegistry> mesh_registry;
  std::unique_ptr<TensorStore> tensor_store;
  std::unique_ptr<TensorOps> tensor_ops;
  std::unique_ptr<MeshHandler> mesh_handler;
  std::unique_ptr<TensorHandler> tensor_handler;

  // Collectives: the engine for the backend, the core over the tensor store,
  // the pool that runs collective RPCs off the gRPC threads, the handler.
  std::unique_ptr<CollectiveEngine> collective_engine;
  std::unique_ptr<CollectiveServiceCore> collective_core;
  std::unique_ptr<WorkerPool> collective_dispatch;
  std::unique_ptr<CollectiveHandler> collective_handler;

  // Sessions: leases over tensors of the store (the gate joins calls to
  // them), and their handler.
  std::unique_ptr<SessionManager> session_manager;
  std::unique_ptr<SessionHandler> session_handler;

  // Shard views' handler (the registry is above).
  std::unique_ptr<ViewHandler> view_handler;

  // Prefetch: open streams over the tensor ops, and their handler.
  std::unique_ptr<PrefetchManager> prefetch_manager;
  std::unique_ptr<PrefetchHandler> prefetch_handler;

  // Cluster (null for a lone daemon): the calls to other daemons, the
  // cluster-wide tensor records and meshes, the PeerService handler.
  std::unique_ptr<PeerClient> peer_client;
  std::unique_ptr<ClusterTensors> cluster_tensors;
  std::unique_ptr<ClusterData> cluster_data;
  std::unique_ptr<ClusterOps> cluster_ops;
  std::unique_ptr<ClusterMeshes> cluster_meshes;
  std::unique_ptr<ClusterCollectives> cluster_collectives;
  std::unique_ptr<PeerHandler> peer_handler;
  // Collectives whose groups span daemons, over the platform's transport
  // (both made once the cluster formed; the engine goes first).
  std::unique_ptr<CrossProcessTransport> transport;
  std::unique_ptr<ClusterEngine> cluster_engine;

  MeshRegistry* meshes() const { return mesh_registry.get(); }
  TensorStore* tensors() const { return tensor_store.get(); }
  TensorOps* ops() const { return tensor_ops.get(); }

  // The steps of Create, in order.
  absl::Status CreateRegions();
  void CreateMeshesAndTensors();
  void CreateCollectives(std::unique_ptr<CollectiveEngine> engine);
  void CreateSessions();
  void CreateViews();
  void CreatePrefetch();
  void CreateCluster();
  void AddMetrics();
  // The steps of AttachCluster.
  void ShowClusterDevices(const ClusterView& view);
  absl::Status CreateClusterEngine();
};

ServiceSet::ServiceSet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ServiceSet::~ServiceSet() = default;

absl::StatusOr<std::unique_ptr<ServiceSet>> ServiceSet::Create(
    DeviceInventory* inventory, std::unique_ptr<CollectiveEngine> engine, CallGate* gate,
    Metrics* metrics, const ServiceSetOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->inventory = inventory;
  impl->gate = gate;
  impl->metrics = metrics;
  impl->options = options;
  RETURN_IF_ERROR(impl->CreateRegions());
  impl->CreateMeshesAndTensors();
  impl->CreateCollectives(std::move(engine));
  impl->CreateSessions();
  impl->CreateViews();
  impl->CreatePrefetch();
  impl->CreateCluster();
  // Last, once nothing can fail: the collectors point into this ServiceSet,
  // so the metrics endpoint must stop before the ServiceSet dies (the Daemon
  // stops it first).
  impl->AddMetrics();
  return std::unique_ptr<ServiceSet>(new ServiceSet(std::move(impl)));
}

absl::Status ServiceSet::Impl::CreateRegions() {
  if (!options.region_socket.empty()) {
    ASSIGN_OR_RETURN(fd_listener, FdPassingListener::Start(options.region_socket,
                                                           options.region_socket_options));
  }
  region_registry = std::make_unique<RegionRegistry>(fd_listener.get(), metrics, options.regions);
  // Regions are pinned for DMA where the backend can (CUDA); elsewhere
  // RegisterHostMemory is UNIMPLEMENTED and regions stay unpinned.
  DeviceBackend* backend = inventory->backend();
  region_registry->set_pinning(
      [backend](void* data, int64_t size) { return backend->RegisterHostMemory(data, size); },
      [backend](void* data) { backend->UnregisterHostMemory(data); });
  region_handler = std::make_unique<RegionHandler>(region_registry.get(), gate);
  return absl::OkStatus();
}

void ServiceSet::Impl::CreateMeshesAndTensors() {
  mesh_registry = std::make_unique<MeshRegistry>(inventory);
  tensor_store = std::make_unique<TensorStore>(inventory->backend(), options.tensors);
  tensor_ops = std::make_unique<TensorOps>(tensors(), meshes());
  mesh_handler = std::make_unique<MeshHandler>(meshes(), ops(), gate);
  tensor_handler = std::make_unique<TensorHandler>(ops(), gate, region_registry.get());
}

void ServiceSet::Impl::CreateCollectives(std::unique_ptr<CollectiveEngine> engine) {
  collective_engine = std::move(engine);
  collective_core =
      std::make_unique<CollectiveServiceCore>(tensors(), collective_engine.get(), metrics);
  // Collective RPCs wait on their engine call; 8 of them may do so at once,
  // more queue (the engine's own pool does the work).
  collective_dispatch = std::make_unique<WorkerPool>(8);
  collective_handler =
      std::make_unique<CollectiveHandler>(collective_core.get(), collective_dispatch.get(), gate);
}

void ServiceSet::Impl::CreateSessions() {
  session_manager = std::make_unique<SessionManager>(tensors(), options.sessions);
  session_handler = std::make_unique<SessionHandler>(session_manager.get(), gate);
  gate->set_sessions(session_manager.get());
  RegionRegistry* regions = region_registry.get();
  SessionManager* sessions = session_manager.get();
  sessions->AddEndListener([regions](const std::string& id) { regions->EndSession(id); });
  regions->set_session_check([sessions](const std::string& id) { return sessions->IsOpen(id); });
  // A session's meshes go with it, after its tensors; one that persisted
  // tensors still use stays, durable.
  MeshRegistry* mesh_registry = meshes();
  const TensorOps* tensor_ops = ops();
  sessions->AddEndListener([mesh_registry, tensor_ops](const std::string& id) {
    for (const std::string& mesh : mesh_registry->SessionMeshes(id)) {
      if (!tensor_ops->DeleteMesh(mesh, /*force=*/false).ok()) mesh_registry->MakeDurable(mesh);
    }
  });
  mesh_handler->set_sessions(sessions);
}

void ServiceSet::Impl::CreateViews() {
  export_registry = std::make_unique<ExportRegistry>(inventory->backend(), metrics,
                                                     fd_listener != nullptr, options.exports);
  ExportRegistry* exports = export_registry.get();
  SessionManager* sessions = session_manager.get();
  exports->set_sessions([sessions](const std::string& id) { return sessions->SessionOf(id); },
                        [sessions](const std::string& id) { return sessions->IsOpen(id); });
  sessions->AddEndListener([exports](const std::string& id) { exports->EndSession(id); });
  upload_reservations = std::make_unique<UploadReservations>(
      inventory->backend(), fd_listener != nullptr, options.exports.uploads);
  UploadReservations* uploads = upload_reservations.get();
  if (fd_listener != nullptr) {
    // One token space: view tokens, then in-place upload tokens (both are
    // 128 random bits).
    fd_listener->set_view_redeemer(
        [exports, uploads](
            const std::string& token,
            const std::shared_ptr<PeerProcess>& process) -> absl::StatusOr<std::vector<int>> {
          absl::StatusOr<std::vector<int>> fds = exports->Redeem(token, process);
          if (!absl::IsNotFound(fds.status())) return fds;
          absl::StatusOr<std::vector<int>> upload = uploads->Redeem(token, process);
          return absl::IsNotFound(upload.status()) ? fds : upload;
        });
  }
  view_handler = std::make_unique<ViewHandler>(ops(), exports, uploads, gate);
}

void ServiceSet::Impl::CreatePrefetch() {
  prefetch_manager = std::make_unique<PrefetchManager>(ops(), metrics);
  prefetch_handler =
      std::make_unique<PrefetchHandler>(prefetch_manager.get(), gate, region_registry.get());
}

void ServiceSet::Impl::CreateCluster() {
  Cluster* cluster = options.cluster;
  if (cluster != nullptr && !cluster->enabled()) {
    // A lone daemon: its shards report its --process_index.
    TensorStoreHooks hooks;
    const int32_t process = cluster->process_index();
    hooks.process_of = [process](int64_t) { return process; };
    tensor_store->set_hooks(std::move(hooks));
  }
  if (cluster == nullptr || !cluster->enabled()) return;
  peer_client = std::make_unique<PeerClient>(options.peer_channels, cluster);
  cluster_tensors = std::make_unique<ClusterTensors>(cluster, tensors(), peer_client.get(),
                                                     cluster->config().op_timeout * 10);
  cluster_meshes = std::make_unique<ClusterMeshes>(cluster, meshes(), ops(), peer_client.get());
  cluster_data =
      std::make_unique<ClusterData>(cluster, tensors(), cluster_tensors.get(), peer_client.get());
  tensor_ops->set_remote_shards(cluster_data.get());
  cluster_ops = std::make_unique<ClusterOps>(cluster, tensors(), cluster_tensors.get(),
                                             cluster_data.get(), peer_client.get());
  tensor_ops->set_distributed(cluster_ops.get());
  peer_handler =
      std::make_unique<PeerHandler>(cluster, inventory, cluster_tensors.get(), cluster_meshes.get(),
                                    cluster_ops.get(), options.peer_gate);
  cluster_collectives = std::make_unique<ClusterCollectives>(
      cluster, collective_core.get(), cluster_tensors.get(), peer_client.get());
  peer_handler->set_collectives(cluster_collectives.get());
  collective_core->set_distributed(cluster_collectives.get());
}

void ServiceSet::Impl::AddMetrics() {
  if (metrics == nullptr) return;
  AddMeshAndTensorMetrics(metrics, meshes(), tensors());
  AddTenantMetrics(metrics, tensors());
  AddSessionMetrics(metrics, session_manager.get());
  AddRegionMetrics(metrics, region_registry.get());
  AddViewMetrics(metrics, export_registry.get());
  AddUploadReservationMetrics(metrics, upload_reservations.get());
  if (cluster_tensors != nullptr)
    AddClusterMetrics(metrics, options.cluster, cluster_tensors.get());
}

void ServiceSet::Register(grpc::ServerBuilder* builder) {
  builder->RegisterService(impl_->mesh_handler.get());
  builder->RegisterService(impl_->tensor_handler.get());
  builder->RegisterService(impl_->collective_handler.get());
  builder->RegisterService(impl_->prefetch_handler.get());
  builder->RegisterService(impl_->session_handler.get());
  builder->RegisterService(impl_->region_handler.get());
  builder->RegisterService(impl_->view_handler.get());
}

void ServiceSet::RegisterPeer(grpc::ServerBuilder* builder) {
  if (impl_->peer_handler) builder->RegisterService(impl_->peer_handler.get());
}

absl::Status ServiceSet::AttachCluster(const ClusterView& view) {
  if (!impl_->cluster_tensors) return absl::OkStatus();
  impl_->ShowClusterDevices(view);
  impl_->cluster_tensors->Attach();
  impl_->cluster_meshes->Attach();
  RETURN_IF_ERROR(impl_->CreateClusterEngine());
  if (impl_->options.cluster->process_index() != 0) {
    // A daemon that joins again finds the cluster's meshes and tensors.
    RETURN_IF_ERROR(impl_->cluster_meshes->Sync());
    RETURN_IF_ERROR(impl_->cluster_tensors->SyncFrom(0));
  }
  return absl::OkStatus();
}

void ServiceSet::Impl::ShowClusterDevices(const ClusterView& view) {
  // ListDevices shows every daemon's devices; the others' accounting comes
  // from them when asked.
  PeerTransport* peers = peer_client.get();
  Cluster* cluster = options.cluster;
  inventory->SetClusterDevices(view.AllDevices(), [peers, cluster] {
    const std::vector<int32_t> alive = cluster->AlivePeers();
    std::vector<std::vector<DeviceState>> per(alive.size());
    // A daemon that does not answer shows no devices this time.
    auto keep = [&](int32_t p, absl::StatusOr<std::vector<DeviceState>> states) {
      const size_t i = std::find(alive.begin(), alive.end(), p) - alive.begin();
      if (states.ok()) per[i] = *std::move(states);
    };
    constexpr absl::Duration kTimeout = absl::Seconds(2);
    FanOutAsync(alive, [&](int32_t p, PeerTransport::Done done) {
      return peers->StartGetLocalDevices(p, kTimeout,
                                         [&keep, p, done = std::move(done)](auto states) {
                                           keep(p, std::move(states));
                                           done(absl::OkStatus());
                                         });
    }).IgnoreError();
    std::vector<DeviceState> out;
    for (auto& v : per) out.insert(out.end(), v.begin(), v.end());
    return out;
  });
}

absl::Status ServiceSet::Impl::CreateClusterEngine() {
  Cluster* cluster = options.cluster;
  CrossProcessTransportOptions transport_options;
  transport_options.store = cluster->coordinator();
  transport_options.backend = inventory->backend();
  transport_options.process_index = cluster->process_index();
  transport_options.hostname = cluster->config().gloo_hostname;
  absl::StatusOr<std::unique_ptr<CrossProcessTransport>> made =
      TransportRegistry::Global().Create(options.cross_process_transport, transport_options);
  if (made.ok()) {
    transport = *std::move(made);
    LogInfo("cluster: collectives between daemons over ", transport->Name(), " on ",
            transport->ListenAddress().empty() ? std::string("(no listener)")
                                               : transport->ListenAddress());
  } else if (options.cross_process_transport_required) {
    return absl::Status(made.status().code(),
                        absl::StrCat("--cluster_transport=", options.cross_process_transport, ": ",
                                     made.status().message()));
  } else if (absl::IsFailedPrecondition(made.status())) {
    // A build without it: collectives that span daemons are refused.
    LogWarning("cluster: ", made.status().message(),
               "; collectives whose tensors span daemons will fail");
  } else {
    return made.status();
  }
  ClusterEngineOptions engine;
  engine.local = collective_engine.get();
  engine.transport = transport.get();
  engine.process_index = cluster->process_index();
  engine.process_of = [cluster](int64_t device) { return cluster->ProcessOf(device); };
  engine.timeout = cluster->config().op_timeout;
  engine.gap_timeout = std::min(cluster->config().op_timeout, absl::Seconds(10));
  engine.check_calls = cluster->config().check_collectives;
  engine.store = cluster->coordinator();
  engine.on_failure = [cluster](const CrossProcessTicket& ticket, const absl::Status& status) {
    cluster->coordinator()
        ->ReportContextFailure(ticket.set_key, static_cast<int64_t>(ticket.generation),
                               std::string(status.message()))
        .IgnoreError();
  };
  ASSIGN_OR_RETURN(cluster_engine, ClusterEngine::Create(std::move(engine)));
  collective_core->set_engine(cluster_engine.get());
  ClusterEngine* made_engine = cluster_engine.get();
  cluster_collectives->set_forfeit(
      [made_engine](const CrossProcessTicket& ticket, const std::vector<int32_t>& participants,
                    const absl::Status& why) { made_engine->Forfeit(ticket, participants, why); });
  cluster_collectives->set_settle(
      [made_engine](const CrossProcessTicket& ticket, const absl::Status& here, bool* late) {
        return made_engine->Settle(ticket, here, late);
      });
  ClusterCollectives* multi = cluster_collectives.get();
  cluster->AddListener([made_engine, cluster, multi](const ClusterEvent& event) {
    multi->OnClusterEvent(event);
    // Calls in flight with a lost process end now, in the cluster's words;
    // a daemon cut off from the cluster ends all of its own.
    for (int32_t lost : event.lost) {
      made_engine->AbortProcess(lost, static_cast<uint64_t>(event.before->epoch),
                                std::string(ProcessGoneError(*event.after, lost).message()));
    }
    if (event.self_lost || event.coordinator_lost) {
      const std::string why = event.self_lost
                                  ? "this daemon was dropped from the cluster (missed heartbeats)"
                                  : "this daemon lost the cluster's coordinator";
      for (int32_t p = 0; p < cluster->num_processes(); ++p) {
        if (p != cluster->process_index()) {
          made_engine->AbortProcess(p, static_cast<uint64_t>(event.before->epoch), why);
        }
      }
    }
    made_engine->DropEpochsBefore(static_cast<uint64_t>(event.after->epoch));
  });
  return absl::OkStatus();
}

const CrossProcessTransport* ServiceSet::cross_process_transport() const {
  return impl_->transport.get();
}

MeshAuthority* ServiceSet::mesh_authority() const { return impl_->cluster_meshes.get(); }

int64_t ServiceSet::pending_tensors() const {
  return impl_->cluster_tensors ? impl_->cluster_tensors->pending_count() : 0;
}

std::string ServiceSet::region_socket() const { return impl_->region_registry->socket_address(); }

DeviceHandler::TenantUseFn ServiceSet::tenant_device_use() const {
  TensorStore* tensors = impl_->tensors();
  return [tensors](const std::string& tenant) { return tensors->TenantDeviceUse(tenant); };
}

std::function<std::optional<MemoryOwnerTag>(const std::string&)> ServiceSet::memory_owner_of()
    const {
  TensorStore* tensors = impl_->tensors();
  return [tensors](const std::string& tenant) { return tensors->FindMemoryOwner(tenant); };
}

DaemonCounts ServiceSet::counts() const {
  DaemonCounts counts;
  MeshRegistry* meshes = impl_->meshes();
  TensorStore* tensors = impl_->tensors();
  counts.meshes = [meshes](const std::string* tenant) -> int64_t {
    if (tenant == nullptr) return meshes->size();
    int64_t n = 0;
    for (const RegisteredMesh& mesh : meshes->List()) n += mesh.tenant == *tenant ? 1 : 0;
    return n;
  };
  counts.tensors = [tensors](const std::string* tenant) {
    return tenant == nullptr ? tensors->size() : tensors->TenantUsageOf(*tenant).tensors;
  };
  counts.device_bytes_in_use = [tensors](const std::string* tenant) -> int64_t {
    if (tenant == nullptr) return 0;  // the handler reports the inventory's
    int64_t total = 0;
    for (const auto& [device, use] : tensors->TenantDeviceUse(*tenant)) total += use.in_use;
    return total;
  };
  PrefetchManager* prefetch = impl_->prefetch_manager.get();
  counts.prefetch_streams = [prefetch](const std::string* tenant) {
    return tenant == nullptr ? prefetch->open_streams() : prefetch->open_streams(*tenant);
  };
  SessionManager* sessions = impl_->session_manager.get();
  counts.sessions = [sessions](const std::string* tenant) {
    return tenant == nullptr ? sessions->size() : sessions->size(*tenant);
  };
  counts.session_tensors = [sessions](const std::string* tenant) {
    return tenant == nullptr ? sessions->tensor_count() : sessions->tensor_count(*tenant);
  };
  RegionRegistry* regions = impl_->region_registry.get();
  counts.regions = [regions](const std::string* tenant) {
    return tenant == nullptr ? regions->size() : regions->size(*tenant);
  };
  return counts;
}

void ServiceSet::StartShutdown() {
  // Open prefetch streams never end by themselves: free their batches and
  // finish them with UNAVAILABLE.
  impl_->prefetch_manager->StartShutdown();
}

}  // namespace placement::server
