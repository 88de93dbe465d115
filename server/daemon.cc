#include "server/daemon.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/host_identity.h"
#include "common/status_macros.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/auth/authenticator.h"
#include "server/auth/served_tls_files.h"
#include "server/cluster/cluster.h"
#include "server/cluster/coordinator.h"
#include "server/cluster/fan_out.h"
#include "server/collective/transport/cross_process_transport.h"
#include "server/daemon_identity.h"
#include "server/daemon_metrics.h"
#include "server/daemon_server.h"
#include "server/device/device_inventory.h"
#include "server/device/memory_reclaimer.h"
#include "server/listen_address.h"
#include "server/logging.h"
#include "server/metrics/http_server.h"
#include "server/metrics/metrics.h"
#include "server/peer/coordinator_client.h"
#include "server/peer/peer_channels.h"
#include "server/ready_file.h"
#include "server/region/region_socket_address.h"
#include "server/service/call_gate.h"
#include "server/service/cluster_handler.h"
#include "server/service/daemon_handler.h"
#include "server/service/device_handler.h"
#include "server/service_set.h"
#include "server/systemd_notifier.h"

namespace placement::server {

// Everything a running daemon holds. Members are destroyed in reverse
// order: handlers and servers before the components they call.
struct DaemonState {
  DaemonConfig config;
  // The parsed addresses (CheckAddresses).
  ListenAddress listen;
  bool in_cluster = false;
  PeerListen peer_listen;
  ListenAddress peer_bind;

  DaemonIdentity identity;
  Metrics metrics;
  // The checked copies of the TLS files gRPC serves (null without TLS), and
  // the transport config that names them (StartTls).
  std::unique_ptr<ServedTlsFiles> tls_files;
  TransportSecurityConfig transport;
  std::unique_ptr<Authenticator> authenticator;
  std::unique_ptr<StreamRegistry> streams;
  CallGate gate;
  // The daemon-to-daemon services' gate: it never waits for the cluster.
  CallGate peer_gate;
  const Platform* platform = nullptr;
  std::unique_ptr<DeviceBackend> backend;
  std::unique_ptr<DeviceInventory> inventory;
  // Gives idle cached blocks and malloc's free pages back (CreateDevices).
  std::unique_ptr<MemoryReclaimer> reclaimer;
  // Cluster membership (disabled for a lone daemon) and the channels to the
  // other daemons; process 0 also runs the coordinator and its
  // ClusterService.
  std::unique_ptr<PeerChannels> peer_channels;
  std::unique_ptr<Cluster> cluster;
  std::unique_ptr<Coordinator> coordinator;
  std::unique_ptr<ClusterHandler> cluster_handler;
  std::unique_ptr<ServiceSet> services;
  std::unique_ptr<DeviceHandler> device_handler;
  std::unique_ptr<DaemonHandler> daemon_handler;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<MetricsHttpServer> metrics_http;
  // The peer port when it is not the public one.
  std::unique_ptr<grpc::Server> peer_server;
  SystemdNotifier systemd;
  std::string address;
  int port = 0;              // the public server's (TCP)
  std::string peer_address;  // advertised; empty outside a cluster
  absl::Mutex drain_mu;
  bool drained = false;
};

namespace {

// The listen, metrics and peer addresses, each checked against the
// transport-security policy.
absl::Status CheckAddresses(DaemonState* state) {
  const DaemonConfig& config = state->config;
  ASSIGN_OR_RETURN(state->listen, ParseListenAddress(config.listen));
  RETURN_IF_ERROR(ValidateTransportSecurity(config.transport, state->listen));
  if (!config.metrics_listen.empty()) {
    ASSIGN_OR_RETURN(ListenAddress metrics_listen, ParseListenAddress(config.metrics_listen));
    // Off loopback the metrics port serves HTTPS with the daemon's own
    // certificate; without one, plaintext there needs --allow_insecure.
    if (!IsLoopback(metrics_listen) && !config.transport.tls() &&
        !config.transport.allow_insecure) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--metrics_listen=", config.metrics_listen,
          " is not a loopback address and, without --tls_cert, the metrics endpoint serves "
          "plaintext HTTP: bind it to 127.0.0.1, give --tls_cert/--tls_key (HTTPS), or pass "
          "--allow_insecure"));
    }
  }
  if (state->listen.is_unix) RETURN_IF_ERROR(CheckUnixSocketFree(state->listen.path));
  RETURN_IF_ERROR(CheckClusterTransport(config.cluster));
  state->in_cluster = config.cluster.enabled();
  if (state->in_cluster) {
    ASSIGN_OR_RETURN(state->peer_listen, ResolvePeerListen(config.cluster, config.process_index,
                                                           config.listen, state->listen));
    ASSIGN_OR_RETURN(state->peer_bind, ParseListenAddress(state->peer_listen.address));
    if (absl::Status s = ValidateTransportSecurity(config.transport, state->peer_bind); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("peer port: ", s.message()));
    }
  }
  return absl::OkStatus();
}

// The numeric bounds no module checks itself.
absl::Status CheckLimits(const DaemonConfig& config) {
  if (config.drain_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--drain_timeout must be >= 0");
  }
  if (config.streams.max_streams < 0 || config.streams.max_streams_per_tenant < 0) {
    return absl::InvalidArgumentError("--max_streams and --tenant_max_streams must be >= 0");
  }
  if (config.streams.idle_timeout < absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stream_idle_timeout must be at least 1s, got ",
                     absl::FormatDuration(config.streams.idle_timeout)));
  }
  if (config.sessions.sweep_interval < absl::Milliseconds(10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--session_sweep_interval must be at least 10ms, got ",
                     absl::FormatDuration(config.sessions.sweep_interval)));
  }
  if (config.regions.registry.max_regions < 0) {
    return absl::InvalidArgumentError("--max_regions must be >= 0");
  }
  if (config.regions.registry.max_regions_per_tenant < 0) {
    return absl::InvalidArgumentError("--tenant_max_regions must be >= 0");
  }
  if (config.regions.exports.max_exports < 0 || config.regions.exports.max_exports_per_tenant < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_exports and --tenant_max_exports must be >= 0, got ",
                     config.regions.exports.max_exports, " and ",
                     config.regions.exports.max_exports_per_tenant));
  }
  const UploadReservationOptions& uploads = config.regions.exports.uploads;
  if (uploads.max_open < 0 || uploads.max_open_per_tenant < 0 ||
      uploads.ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_upload_reservations and --tenant_max_upload_reservations must be >= 0 and "
        "--upload_reservation_ttl > 0, got ",
        uploads.max_open, ", ", uploads.max_open_per_tenant, " and ",
        absl::FormatDuration(uploads.ttl)));
  }
  if (config.sessions.max_sessions < 0 || config.sessions.max_sessions_per_tenant < 0) {
    return absl::InvalidArgumentError("--max_sessions and --tenant_max_sessions must be >= 0");
  }
  if (config.reclaimer.cache_idle < absl::Milliseconds(100) ||
      config.reclaimer.min_available_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--device_cache_idle must be at least 100ms (got ",
        absl::FormatDuration(config.reclaimer.cache_idle),
        ") and --host_memory_min_available >= 0 (got ", config.reclaimer.min_available_bytes, ")"));
  }
  return absl::OkStatus();
}

// With TLS, the checked copies of the TLS files that gRPC serves: a
// rotation that does not parse or pair up is refused and the old pair kept
// (server/auth/served_tls_files.h). INVALID_ARGUMENT for such files at start.
absl::Status StartTls(DaemonState* state) {
  state->transport = state->config.transport;
  if (!state->config.transport.tls()) return absl::OkStatus();
  ASSIGN_OR_RETURN(state->tls_files,
                   ServedTlsFiles::Create(state->config.transport, &state->metrics));
  state->transport = state->tls_files->served();
  return absl::OkStatus();
}

// The authenticator (--auth_file) and the stream bounds, both behind the
// gates.
absl::Status StartGates(DaemonState* state) {
  const DaemonConfig& config = state->config;
  if (config.auth_file.empty()) {
    state->authenticator = std::make_unique<Authenticator>();
  } else {
    auto authenticator = Authenticator::FromFile(config.auth_file);
    if (!authenticator.ok()) return absl::InvalidArgumentError(authenticator.status().message());
    state->authenticator = std::move(*authenticator);
  }
  state->gate.set_authenticator(state->authenticator.get());
  state->peer_gate.set_authenticator(state->authenticator.get());
  state->streams = std::make_unique<StreamRegistry>(config.streams);
  state->gate.set_streams(state->streams.get());
  return absl::OkStatus();
}

// Says what an operator exposes by choice (--allow_insecure, no
// --auth_file) on a reachable address.
void WarnAboutExposure(const DaemonState& state) {
  const DaemonConfig& config = state.config;
  if (!config.transport.tls() && !IsLoopback(state.listen)) {
    LogWarning("serving plaintext gRPC on non-loopback ", config.listen,
               " (--allow_insecure): anyone who can reach the port can read and inject traffic");
  }
  if (state.in_cluster && !config.transport.tls() && !IsLoopback(state.peer_bind)) {
    LogWarning("serving the daemon-to-daemon services plaintext on non-loopback --peer_listen=",
               state.peer_listen.address,
               " (--allow_insecure): anyone who can reach the port can read the tensors daemons "
               "exchange and call the cluster's coordinator");
  }
  if (!state.authenticator->enabled() && !IsLoopback(state.listen)) {
    LogWarning("authentication is off (no --auth_file) on non-loopback ", config.listen,
               ": every client that reaches the port manages every tensor");
  }
}

// The platform's backend and devices, and its collective engine; the
// daemon's identity.
absl::StatusOr<std::unique_ptr<CollectiveEngine>> CreateDevices(DaemonState* state) {
  const DaemonConfig& config = state->config;
  const PlatformConfig platform_config = MakePlatformConfig(config.backend, config.process_index);
  ASSIGN_OR_RETURN(BackendSelection selection,
                   SelectPlatform(config.backend.kind, platform_config));
  state->platform = selection.platform;
  state->backend = std::move(selection.backend);
  LogInfo("backend: ", state->backend->Name(), ": ", selection.note);
  state->inventory = std::make_unique<DeviceInventory>(state->backend.get());
  state->reclaimer =
      std::make_unique<MemoryReclaimer>(state->backend.get(), &state->metrics, config.reclaimer);
  DaemonIdentity& id = state->identity;
  id.version = PlacementVersion();
  id.instance_id = NewInstanceId();
  id.start_time = absl::Now();
  id.backend = std::string(state->backend->Name());
  id.backend_note = selection.note;
  id.process_index = config.process_index;
  id.host_id = HostId();
  id.boot_id = BootId();
  return selection.platform->CreateEngine(state->backend.get(), platform_config);
}

// This daemon's Cluster (disabled for a lone daemon); on process 0 of a
// cluster also the coordinator and its ClusterService.
absl::Status CreateCluster(DaemonState* state) {
  const DaemonConfig& config = state->config;
  ClusterConfig cluster_config;
  cluster_config.process_index = config.process_index;
  if (!state->in_cluster) {
    state->cluster = std::make_unique<Cluster>(cluster_config, nullptr);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::string token, ReadPeerToken(config.cluster.peer_token_file));
  cluster_config.coordinator = config.cluster.coordinator;
  cluster_config.num_processes = config.cluster.num_processes;
  cluster_config.init_timeout = config.cluster.init_timeout;
  cluster_config.heartbeat_interval = config.cluster.heartbeat_interval;
  cluster_config.heartbeat_misses = config.cluster.heartbeat_misses;
  cluster_config.op_timeout = config.cluster.op_timeout;
  cluster_config.check_collectives = config.cluster.check_collectives;
  state->peer_channels = std::make_unique<PeerChannels>(
      PeerSecurity{state->transport, config.cluster.peer_tls_server_name, std::move(token)});
  PeerChannels* channels = state->peer_channels.get();
  state->cluster =
      std::make_unique<Cluster>(cluster_config, [channels](const std::string& address) {
        return std::make_unique<CoordinatorClient>(channels, address);
      });
  if (config.process_index == 0) {
    MembershipOptions membership;
    membership.num_processes = config.cluster.num_processes;
    membership.coordinator_instance_id = state->identity.instance_id;
    membership.heartbeat_interval = config.cluster.heartbeat_interval;
    membership.heartbeat_misses = config.cluster.heartbeat_misses;
    state->coordinator = std::make_unique<Coordinator>(membership);
    state->cluster_handler =
        std::make_unique<ClusterHandler>(state->coordinator.get(), &state->peer_gate);
  }
  return absl::OkStatus();
}

// The data plane (ServiceSet) over the devices, and the device and daemon
// handlers.
absl::Status CreateServices(DaemonState* state, std::unique_ptr<CollectiveEngine> engine) {
  const DaemonConfig& config = state->config;
  ServiceSetOptions options;
  options.tensors = config.tensors;
  options.sessions = config.sessions;
  options.regions = config.regions.registry;
  options.exports = config.regions.exports;
  options.region_socket =
      ResolveRegionSocket(config.regions.socket, state->listen.is_unix ? state->listen.path : "",
                          state->identity.instance_id);
  ASSIGN_OR_RETURN(options.region_socket_options.access,
                   ParseSocketAccess(config.regions.socket_mode, config.regions.socket_group));
  options.cluster = state->cluster.get();
  options.peer_channels = state->peer_channels.get();
  options.peer_gate = &state->peer_gate;
  options.cross_process_transport = config.cluster.transport.empty()
                                        ? state->platform->cross_process_transport()
                                        : config.cluster.transport;
  options.cross_process_transport_required = !config.cluster.transport.empty();
  ASSIGN_OR_RETURN(state->services, ServiceSet::Create(state->inventory.get(), std::move(engine),
                                                       &state->gate, &state->metrics, options));
  state->identity.region_socket = state->services->region_socket();
  if (state->cluster_handler) state->cluster_handler->set_meshes(state->services->mesh_authority());
  state->device_handler = std::make_unique<DeviceHandler>(state->inventory.get(), &state->gate,
                                                          state->services->tenant_device_use());
  DaemonCounts counts = state->services->counts();
  StreamRegistry* streams = state->streams.get();
  counts.open_streams = [streams](const std::string* tenant) {
    return tenant == nullptr ? streams->open_streams() : streams->open_streams(*tenant);
  };
  counts.streams = [streams] { return streams->List(); };
  MemoryReclaimer* reclaimer = state->reclaimer.get();
  auto trim = [reclaimer, owner_of = state->services->memory_owner_of()](
                  const std::string& tenant) -> absl::StatusOr<TrimResult> {
    if (tenant.empty()) return reclaimer->TrimNow();
    const std::optional<MemoryOwnerTag> owner = owner_of(tenant);
    if (!owner) {
      return absl::NotFoundError(
          absl::StrCat("TrimMemory: tenant '", tenant, "' has never held memory on this daemon"));
    }
    return reclaimer->TrimNow(*owner);
  };
  state->daemon_handler =
      std::make_unique<DaemonHandler>(&state->identity, state->inventory.get(), std::move(counts),
                                      &state->gate, state->cluster.get(), std::move(trim));
  return absl::OkStatus();
}

// Registers the daemon-to-daemon services on `builder`.
void RegisterPeerServices(DaemonState* state, grpc::ServerBuilder* builder) {
  state->services->RegisterPeer(builder);
  if (state->cluster_handler) builder->RegisterService(state->cluster_handler.get());
}

// The public gRPC server: every handler, health, reflection. In a cluster
// it answers UNAVAILABLE (and health NOT_SERVING) until the cluster formed.
absl::Status StartPublicServer(DaemonState* state) {
  const DaemonConfig& config = state->config;
  grpc::EnableDefaultHealthCheckService(true);
  // Reflection describes only services whose descriptors are linked in; gRPC's
  // health service brings none, so reference ours (proto/grpc/health/v1).
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  if (config.reflection) grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  ApplyServerDefaults(&builder);
  int port = 0;
  builder.AddListeningPort(state->listen.ToGrpcUri(state->listen.port),
                           MakeServerCredentials(state->transport),
                           state->listen.is_unix ? nullptr : &port);
  builder.RegisterService(state->device_handler.get());
  builder.RegisterService(state->daemon_handler.get());
  state->services->Register(&builder);
  if (state->in_cluster && state->peer_listen.shared) RegisterPeerServices(state, &builder);
  if (state->in_cluster) {
    state->gate.SetNotReady(absl::StrCat("placementd is joining its cluster as process ",
                                         config.process_index, " of ", config.cluster.num_processes,
                                         "; it serves once every process has joined"));
  }
  SetDaemonInterceptors(&builder, &state->metrics);
  state->server = builder.BuildAndStart();
  if (state->server == nullptr || (!state->listen.is_unix && port == 0)) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", config.listen,
                     ": the address is already in use or not available on this host"));
  }
  state->port = port;
  state->address = state->listen.ToGrpcUri(port);
  state->identity.listen_address = state->address;
  state->server->GetHealthCheckService()->SetServingStatus(!state->in_cluster);
  return absl::OkStatus();
}

// The peer server when --peer_listen is not the public address; sets the
// advertised peer address.
absl::Status StartPeerServer(DaemonState* state) {
  int port = state->port;
  if (!state->peer_listen.shared) {
    grpc::ServerBuilder builder;
    ApplyServerDefaults(&builder);
    builder.AddListeningPort(state->peer_bind.ToGrpcUri(state->peer_bind.port),
                             MakeServerCredentials(state->transport), &port);
    RegisterPeerServices(state, &builder);
    SetDaemonInterceptors(&builder, nullptr);
    state->peer_server = builder.BuildAndStart();
    if (state->peer_server == nullptr || port == 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on --peer_listen=", state->peer_listen.address,
                       ": the address is already in use or not available on this host"));
    }
  }
  state->peer_address = AdvertisedPeerAddress(state->config.cluster, state->peer_bind, port);
  return absl::OkStatus();
}

// Stops what StartPublicServer and JoinCluster started, for a start that
// fails after them.
void StopServers(DaemonState* state) {
  // No listener of the services (destroyed before the cluster) runs again.
  if (state->cluster) state->cluster->StopHeartbeats();
  if (state->coordinator) state->coordinator->Shutdown();
  const auto now = absl::ToChronoTime(absl::Now());
  if (state->peer_server) state->peer_server->Shutdown(now);
  if (state->server) state->server->Shutdown(now);
}

// Starts the peer server, joins the cluster (blocking up to
// --cluster_init_timeout), assigns the global device ids and opens the
// gate.
absl::Status JoinCluster(DaemonState* state) {
  const DaemonConfig& config = state->config;
  RETURN_IF_ERROR(StartPeerServer(state));
  state->cluster->SetAddresses(state->peer_address, HostOf(state->peer_address));
  LogInfo("cluster: joining as process ", config.process_index, " of ",
          config.cluster.num_processes, " through the coordinator at ",
          state->cluster->config().coordinator, " (peer address ", state->peer_address, ")");
  absl::StatusOr<std::shared_ptr<const ClusterView>> view =
      state->cluster->Join(state->backend->Devices(), state->identity.instance_id);
  if (!view.ok()) return ExplainJoinFailure(view.status(), config.transport);
  const ProcessRecord& self = (*view)->processes[config.process_index];
  RETURN_IF_ERROR(state->backend->AssignGlobalIds(self.first_device_id, config.process_index));
  RETURN_IF_ERROR(state->services->AttachCluster(**view));
  const CrossProcessTransport* transport = state->services->cross_process_transport();
  if (config.transport.tls() && transport != nullptr && !transport->encrypted()) {
    LogWarning("cluster: TLS (--tls_*) protects the gRPC and peer ports, not the ",
               transport->Name(), " connections between daemons: the bytes of collectives that ",
               "span daemons cross the network in plaintext (",
               transport->Name() == "gloo" ? "Debian's Gloo has no TLS" : "it does not encrypt",
               "). Keep ",
               "them on a private cluster network or encrypt it below the daemons (WireGuard, "
               "IPsec); see docs/security.md");
  }
  state->cluster->StartHeartbeats();
  state->gate.SetReady();
  state->server->GetHealthCheckService()->SetServingStatus(true);
  LogInfo("cluster: formed at epoch ", (*view)->epoch, " with ", (*view)->num_processes,
          " processes and ", (*view)->AllDevices().size(), " devices; this daemon's are ids ",
          self.first_device_id, "..",
          self.first_device_id + static_cast<int64_t>(self.devices.size()) - 1);
  return absl::OkStatus();
}

// The Prometheus endpoint (--metrics_listen): HTTPS with the daemon's
// certificate off loopback when it has one.
absl::Status StartMetrics(DaemonState* state) {
  const DaemonConfig& config = state->config;
  if (config.metrics_listen.empty()) return absl::OkStatus();
  AddDaemonGauges(&state->metrics, state->inventory.get(), &state->gate, state->streams.get());
  std::optional<MetricsHttpServer::Tls> tls;
  auto metrics_listen = ParseListenAddress(config.metrics_listen);
  if (config.transport.tls() && metrics_listen.ok() && !IsLoopback(*metrics_listen)) {
    tls = MetricsHttpServer::Tls{config.transport.tls_cert, config.transport.tls_key};
  }
  const CallGate* gate = &state->gate;
  ASSIGN_OR_RETURN(state->metrics_http, MetricsHttpServer::Start(
                                            config.metrics_listen, state->metrics,
                                            [gate] { return !gate->draining(); }, tls));
  LogInfo("metrics on ", state->metrics_http->scheme(), "://", state->metrics_http->address(),
          "/metrics");
  return absl::OkStatus();
}

// The ready file, the "serving on" line, systemd's READY=1.
absl::Status AnnounceServing(DaemonState* state) {
  const DaemonConfig& config = state->config;
  if (!config.ready_file.empty()) {
    ReadyFileContents contents{state->address, "", state->peer_address};
    if (state->metrics_http != nullptr) {
      contents.metrics_url = absl::StrCat(state->metrics_http->scheme(), "://",
                                          state->metrics_http->address(), "/metrics");
    }
    RETURN_IF_ERROR(WriteReadyFile(config.ready_file, contents));
  }
  LogInfo("transport: ",
          config.transport.mutual_tls() ? "mutual TLS"
          : config.transport.tls()      ? "TLS"
                                        : "plaintext",
          "; authentication: ",
          state->authenticator->enabled() ? absl::StrCat("on (", config.auth_file, ")")
                                          : std::string("off (one implicit tenant)"));
  LogInfo("placementd ", state->identity.version, " serving on ", state->address, " with ",
          state->inventory->num_devices(), " ", state->identity.backend, " device(s); instance ",
          state->identity.instance_id);
  state->systemd.NotifyReady(absl::StrCat("serving on ", state->address));
  return absl::OkStatus();
}

}  // namespace

Daemon::Daemon(std::unique_ptr<DaemonState> state) : state_(std::move(state)) {}

Daemon::~Daemon() { Drain(); }

const std::string& Daemon::address() const { return state_->address; }
int Daemon::metrics_port() const { return state_->metrics_http ? state_->metrics_http->port() : 0; }
const std::string& Daemon::backend_note() const { return state_->identity.backend_note; }

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const DaemonConfig& config) {
  auto state = std::make_unique<DaemonState>();
  state->config = config;
  RETURN_IF_ERROR(CheckAddresses(state.get()));
  RETURN_IF_ERROR(CheckLimits(config));
  RETURN_IF_ERROR(CheckReadyFile(config.ready_file));
  RETURN_IF_ERROR(StartTls(state.get()));
  RETURN_IF_ERROR(StartGates(state.get()));
  WarnAboutExposure(*state);
  ASSIGN_OR_RETURN(std::unique_ptr<CollectiveEngine> engine, CreateDevices(state.get()));
  RETURN_IF_ERROR(CreateCluster(state.get()));
  RETURN_IF_ERROR(CreateServices(state.get(), std::move(engine)));
  RETURN_IF_ERROR(StartPublicServer(state.get()));
  absl::Status started = state->in_cluster ? JoinCluster(state.get()) : absl::OkStatus();
  if (started.ok()) started = StartMetrics(state.get());
  if (started.ok()) started = AnnounceServing(state.get());
  if (!started.ok()) {
    StopServers(state.get());
    return started;
  }
  return std::unique_ptr<Daemon>(new Daemon(std::move(state)));
}

void Daemon::Reload() {
  if (state_->authenticator) (void)state_->authenticator->Reload();
}

void Daemon::Drain() {
  absl::MutexLock lock(&state_->drain_mu);
  if (state_->drained) return;
  state_->drained = true;
  DaemonState& s = *state_;
  s.systemd.NotifyStopping();
  if (s.server) s.server->GetHealthCheckService()->SetServingStatus(false);
  s.gate.StartDraining();
  LogInfo("draining: refusing new calls; waiting up to ",
          absl::FormatDuration(s.config.drain_timeout), " for ", s.gate.in_flight(),
          " in-flight call(s)");
  absl::Time deadline = absl::Now() + s.config.drain_timeout;
  if (!s.gate.WaitIdle(deadline)) {
    LogWarning("drain deadline passed with ", s.gate.in_flight(), " call(s) in flight; cancelling");
  }
  if (s.services) s.services->StartShutdown();
  if (s.cluster) s.cluster->Leave();
  if (s.coordinator) s.coordinator->Shutdown();
  if (s.peer_server) {
    s.peer_server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    s.peer_server->Wait();
  }
  if (s.server) {
    s.server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    s.server->Wait();
  }
  if (s.metrics_http) s.metrics_http->Stop();
  LogInfo("drained; stopped serving");
}

}  // namespace placement::server
