#include "server/daemon.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <vector>

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
#include "server/auth/transport_security.h"
#include "server/cluster/cluster.h"
#include "server/cluster/coordinator.h"
#include "server/daemon_identity.h"
#include "server/device/device_inventory.h"
#include "server/listen_address.h"
#include "server/logging.h"
#include "server/metrics/http_server.h"
#include "server/metrics/metrics.h"
#include "server/service/call_gate.h"
#include "server/service/cluster_handler.h"
#include "server/service/daemon_handler.h"
#include "server/service/device_handler.h"
#include "server/service/malformed_request_interceptor.h"
#include "server/service/rpc_metrics_interceptor.h"
#include "server/service_set.h"
#include "server/systemd_notifier.h"

namespace placement::server {
namespace {

// A unix socket path that accepts connections belongs to a live server;
// gRPC would unlink it and steal the address, so refuse instead.
absl::Status CheckUnixSocketFree(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("unix socket path '", path, "' is longer than ",
                                                   sizeof(addr.sun_path) - 1, " bytes"));
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::OkStatus();
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  if (live) {
    return absl::UnavailableError(absl::StrCat("cannot listen on unix:", path,
                                               ": address already in use by a running server"));
  }
  return absl::OkStatus();
}

// Line 1: the gRPC address. With metrics on, a line
// "metrics=http://HOST:PORT/metrics"; in a cluster, "peer=HOST:PORT" (what
// other daemons dial; process 0's is the --coordinator of the others).
absl::Status WriteReadyFile(const std::string& path, const std::string& address,
                            const MetricsHttpServer* metrics_http,
                            const std::string& peer_address) {
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << address << "\n";
    if (metrics_http != nullptr) {
      out << "metrics=" << metrics_http->scheme() << "://" << metrics_http->address()
          << "/metrics\n";
    }
    if (!peer_address.empty()) out << "peer=" << peer_address << "\n";
    if (!out.good()) return absl::InternalError(absl::StrCat("cannot write --ready_file ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

}  // namespace

struct Daemon::State {
  DaemonConfig config;
  DaemonIdentity identity;
  Metrics metrics;
  std::unique_ptr<Authenticator> authenticator;
  std::unique_ptr<StreamRegistry> streams;
  CallGate gate;
  // The daemon-to-daemon services' gate: it never waits for the cluster.
  CallGate peer_gate;
  std::unique_ptr<DeviceBackend> backend;
  std::unique_ptr<DeviceInventory> inventory;
  // Cluster membership (disabled for a lone daemon); process 0 also runs
  // the coordinator and its ClusterService.
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
  std::string peer_address;  // advertised; empty outside a cluster
  absl::Mutex drain_mu;
  bool drained = false;
};

Daemon::Daemon(std::unique_ptr<State> state) : state_(std::move(state)) {}

Daemon::~Daemon() { Drain(); }

const std::string& Daemon::address() const { return state_->address; }
int Daemon::metrics_port() const { return state_->metrics_http ? state_->metrics_http->port() : 0; }
const std::string& Daemon::backend_note() const { return state_->identity.backend_note; }

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const DaemonConfig& config) {
  ASSIGN_OR_RETURN(ListenAddress listen, ParseListenAddress(config.listen));
  if (config.drain_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--drain_timeout must be >= 0");
  }
  RETURN_IF_ERROR(ValidateTransportSecurity(config.transport, listen));
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
  if (listen.is_unix) RETURN_IF_ERROR(CheckUnixSocketFree(listen.path));
  const bool in_cluster = config.cluster.enabled();
  PeerListen peer_listen;
  ListenAddress peer_bind;
  if (in_cluster) {
    ASSIGN_OR_RETURN(peer_listen, ResolvePeerListen(config.cluster, config.process_index,
                                                    config.listen, listen));
    ASSIGN_OR_RETURN(peer_bind, ParseListenAddress(peer_listen.address));
    if (absl::Status s = ValidateTransportSecurity(config.transport, peer_bind); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("peer port: ", s.message()));
    }
  }

  auto state = std::make_unique<State>();
  state->config = config;
  if (config.auth_file.empty()) {
    state->authenticator = std::make_unique<Authenticator>();
  } else {
    auto authenticator = Authenticator::FromFile(config.auth_file);
    if (!authenticator.ok()) {
      return absl::InvalidArgumentError(authenticator.status().message());
    }
    state->authenticator = std::move(*authenticator);
  }
  state->gate.set_authenticator(state->authenticator.get());
  state->peer_gate.set_authenticator(state->authenticator.get());
  if (config.max_streams < 0 || config.tenant_max_streams < 0) {
    return absl::InvalidArgumentError("--max_streams and --tenant_max_streams must be >= 0");
  }
  if (config.stream_idle_timeout < absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stream_idle_timeout must be at least 1s, got ",
                     absl::FormatDuration(config.stream_idle_timeout)));
  }
  state->streams = std::make_unique<StreamRegistry>(
      StreamLimits{config.max_streams, config.tenant_max_streams, config.stream_idle_timeout});
  state->gate.set_streams(state->streams.get());
  if (!config.transport.tls() && !IsLoopback(listen)) {
    LogWarning("serving plaintext gRPC on non-loopback ", config.listen,
               " (--allow_insecure): anyone who can reach the port can read and inject traffic");
  }
  if (!state->authenticator->enabled() && !IsLoopback(listen)) {
    LogWarning("authentication is off (no --auth_file) on non-loopback ", config.listen,
               ": every client that reaches the port manages every tensor");
  }
  const PlatformConfig platform_config = MakePlatformConfig(config.backend, config.process_index);
  ASSIGN_OR_RETURN(BackendSelection selection,
                   SelectPlatform(config.backend.kind, platform_config));
  state->backend = std::move(selection.backend);
  LogInfo("backend: ", state->backend->Name(), ": ", selection.note);
  state->inventory = std::make_unique<DeviceInventory>(state->backend.get());
  ASSIGN_OR_RETURN(std::unique_ptr<CollectiveEngine> engine,
                   selection.platform->CreateEngine(state->backend.get(), platform_config));

  DaemonIdentity& id = state->identity;
  id.version = PlacementVersion();
  id.instance_id = NewInstanceId();
  id.start_time = absl::Now();
  id.backend = std::string(state->backend->Name());
  id.backend_note = selection.note;
  id.process_index = config.process_index;

  ServiceSetOptions service_options;
  service_options.max_tensor_bytes_per_owner = config.max_tensor_bytes_per_owner;
  service_options.max_device_bytes_per_tenant = config.tenant_max_device_bytes;
  service_options.max_tensors_per_tenant = config.tenant_max_tensors;
  if (config.session_sweep_interval < absl::Milliseconds(10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--session_sweep_interval must be at least 10ms, got ",
                     absl::FormatDuration(config.session_sweep_interval)));
  }
  service_options.sessions.sweep_interval = config.session_sweep_interval;
  if (config.max_regions < 0) return absl::InvalidArgumentError("--max_regions must be >= 0");
  service_options.region_socket = config.region_socket != "auto" ? config.region_socket
                                  : listen.is_unix
                                      ? absl::StrCat(listen.path, ".regions")
                                      : absl::StrCat("@placementd-regions-", id.instance_id);
  service_options.regions.allow_shm_names = config.allow_shm_regions;
  service_options.regions.max_regions = config.max_regions;
  if (config.tenant_max_regions < 0) {
    return absl::InvalidArgumentError("--tenant_max_regions must be >= 0");
  }
  service_options.regions.max_regions_per_tenant = config.tenant_max_regions;
  id.host_id = HostId();
  id.boot_id = BootId();
  if (in_cluster) {
    ASSIGN_OR_RETURN(std::string token, ReadPeerToken(config.cluster.peer_token_file));
    ClusterConfig cluster_config;
    cluster_config.coordinator = config.cluster.coordinator;
    cluster_config.process_index = config.process_index;
    cluster_config.num_processes = config.cluster.num_processes;
    cluster_config.init_timeout = config.cluster.init_timeout;
    cluster_config.heartbeat_interval = config.cluster.heartbeat_interval;
    cluster_config.heartbeat_misses = config.cluster.heartbeat_misses;
    cluster_config.op_timeout = config.cluster.op_timeout;
    state->cluster = std::make_unique<Cluster>(
        cluster_config,
        PeerSecurity{config.transport, config.cluster.peer_tls_server_name, std::move(token)});
    if (config.process_index == 0) {
      MembershipOptions membership;
      membership.num_processes = config.cluster.num_processes;
      membership.coordinator_instance_id = id.instance_id;
      membership.heartbeat_interval = config.cluster.heartbeat_interval;
      membership.heartbeat_misses = config.cluster.heartbeat_misses;
      state->coordinator = std::make_unique<Coordinator>(membership);
      state->cluster_handler =
          std::make_unique<ClusterHandler>(state->coordinator.get(), &state->peer_gate);
    }
  } else {
    ClusterConfig lone;
    lone.process_index = config.process_index;
    state->cluster = std::make_unique<Cluster>(lone, PeerSecurity{});
  }
  service_options.cluster = state->cluster.get();
  service_options.peer_gate = &state->peer_gate;
  ASSIGN_OR_RETURN(state->services,
                   ServiceSet::Create(state->inventory.get(), std::move(engine), &state->gate,
                                      &state->metrics, service_options));
  id.region_socket = state->services->region_socket();
  if (state->cluster_handler) state->cluster_handler->set_meshes(state->services->mesh_authority());
  state->device_handler = std::make_unique<DeviceHandler>(state->inventory.get(), &state->gate);
  DaemonCounts counts = state->services->counts();
  StreamRegistry* streams = state->streams.get();
  counts.open_streams = [streams] { return streams->open_streams(); };
  state->daemon_handler =
      std::make_unique<DaemonHandler>(&state->identity, state->inventory.get(), std::move(counts),
                                      &state->gate, state->cluster.get());

  grpc::EnableDefaultHealthCheckService(true);
  // Reflection describes only services whose descriptors are linked in; gRPC's
  // health service brings none, so reference ours (proto/grpc/health/v1).
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  if (config.reflection) grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // Two daemons must never share a port: without this gRPC sets SO_REUSEPORT.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  int selected_port = 0;
  std::string bind_uri = listen.ToGrpcUri(listen.port);
  builder.AddListeningPort(bind_uri, MakeServerCredentials(config.transport),
                           listen.is_unix ? nullptr : &selected_port);
  builder.RegisterService(state->device_handler.get());
  builder.RegisterService(state->daemon_handler.get());
  state->services->Register(&builder);
  if (in_cluster && peer_listen.shared) {
    state->services->RegisterPeer(&builder);
    if (state->cluster_handler) builder.RegisterService(state->cluster_handler.get());
  }
  if (in_cluster) {
    state->gate.SetNotReady(absl::StrCat(
        "placementd is joining its cluster as process ", config.process_index, " of ",
        config.cluster.num_processes, "; it serves once every process has joined"));
  }
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(MakeMalformedRequestInterceptorFactory());
  interceptors.push_back(MakeRpcMetricsInterceptorFactory(&state->metrics));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  state->server = builder.BuildAndStart();
  if (state->server == nullptr || (!listen.is_unix && selected_port == 0)) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", config.listen,
                     ": the address is already in use or not available on this host"));
  }
  state->address = listen.ToGrpcUri(selected_port);
  id.listen_address = state->address;
  grpc::HealthCheckServiceInterface* health = state->server->GetHealthCheckService();
  health->SetServingStatus(!in_cluster);
  if (in_cluster) RETURN_IF_ERROR(JoinCluster(state.get(), peer_listen, peer_bind, selected_port));

  if (!config.metrics_listen.empty()) {
    State* raw = state.get();
    state->metrics.AddCollector([raw](std::vector<GaugeSample>* out) {
      for (const DeviceState& d : raw->inventory->List()) {
        MetricLabels labels = {{"device", absl::StrCat(d.description.id)},
                               {"platform", d.description.platform}};
        out->push_back({"placementd_device_memory_in_use_bytes", labels,
                        static_cast<double>(d.memory_in_use_bytes)});
        out->push_back({"placementd_device_memory_cached_bytes", labels,
                        static_cast<double>(d.memory_cached_bytes)});
        out->push_back({"placementd_device_memory_limit_bytes", labels,
                        static_cast<double>(d.description.memory_limit_bytes)});
      }
      out->push_back({"placementd_inflight_calls", {}, static_cast<double>(raw->gate.in_flight())});
      out->push_back({"placementd_up", {}, raw->gate.draining() ? 0.0 : 1.0});
      out->push_back(
          {"placementd_open_streams", {}, static_cast<double>(raw->streams->open_streams())});
      out->push_back(
          {"placementd_streams_reaped", {}, static_cast<double>(raw->streams->reaped_total())});
    });
    state->metrics.Describe("placementd_open_streams", "gauge",
                            "Upload, download and prefetch streams open now (--max_streams).");
    state->metrics.Describe("placementd_streams_reaped", "gauge",
                            "Streams cancelled since start for making no progress "
                            "(--stream_idle_timeout).");
    state->metrics.Describe("placementd_device_memory_in_use_bytes", "gauge",
                            "Bytes the daemon holds on each device.");
    state->metrics.Describe("placementd_device_memory_cached_bytes", "gauge",
                            "Freed bytes kept for reuse on each device (within its budget).");
    state->metrics.Describe("placementd_device_memory_limit_bytes", "gauge",
                            "Byte budget of each device.");
    state->metrics.Describe("placementd_inflight_calls", "gauge", "RPCs currently running.");
    state->metrics.Describe("placementd_up", "gauge", "1 while serving, 0 while draining.");
    std::optional<MetricsHttpServer::Tls> metrics_tls;
    auto metrics_listen = ParseListenAddress(config.metrics_listen);
    if (config.transport.tls() && metrics_listen.ok() && !IsLoopback(*metrics_listen)) {
      metrics_tls = MetricsHttpServer::Tls{config.transport.tls_cert, config.transport.tls_key};
    }
    auto http = MetricsHttpServer::Start(
        config.metrics_listen, state->metrics, [raw] { return !raw->gate.draining(); },
        metrics_tls);
    if (!http.ok()) {
      state->server->Shutdown(absl::ToChronoTime(absl::Now()));
      return http.status();
    }
    state->metrics_http = std::move(*http);
    LogInfo("metrics on ", state->metrics_http->scheme(), "://", state->metrics_http->address(),
            "/metrics");
  }

  LogInfo("transport: ",
          config.transport.mutual_tls() ? "mutual TLS"
          : config.transport.tls()      ? "TLS"
                                        : "plaintext",
          "; authentication: ",
          state->authenticator->enabled() ? absl::StrCat("on (", config.auth_file, ")")
                                          : std::string("off (one implicit tenant)"));
  LogInfo("placementd ", id.version, " serving on ", state->address, " with ",
          state->inventory->num_devices(), " ", id.backend, " device(s); instance ",
          id.instance_id);
  if (!config.ready_file.empty())
    RETURN_IF_ERROR(WriteReadyFile(config.ready_file, state->address, state->metrics_http.get(),
                                   state->peer_address));
  state->systemd.NotifyReady(absl::StrCat("serving on ", state->address));
  return std::unique_ptr<Daemon>(new Daemon(std::move(state)));
}

absl::Status Daemon::JoinCluster(State* state, const PeerListen& peer_listen,
                                 const ListenAddress& peer_bind, int public_port) {
  const DaemonConfig& config = state->config;
  auto fail = [state](absl::Status status) {
    if (state->coordinator) state->coordinator->Shutdown();
    const auto now = absl::ToChronoTime(absl::Now());
    if (state->peer_server) state->peer_server->Shutdown(now);
    state->server->Shutdown(now);
    return status;
  };
  int peer_port = public_port;
  if (!peer_listen.shared) {
    grpc::ServerBuilder builder;
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
    builder.AddListeningPort(peer_bind.ToGrpcUri(peer_bind.port),
                             MakeServerCredentials(config.transport), &peer_port);
    state->services->RegisterPeer(&builder);
    if (state->cluster_handler) builder.RegisterService(state->cluster_handler.get());
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> chain;
    chain.push_back(MakeMalformedRequestInterceptorFactory());
    builder.experimental().SetInterceptorCreators(std::move(chain));
    state->peer_server = builder.BuildAndStart();
    if (state->peer_server == nullptr || peer_port == 0) {
      return fail(absl::UnavailableError(
          absl::StrCat("cannot listen on --peer_listen=", peer_listen.address,
                       ": the address is already in use or not available on this host")));
    }
  }
  state->peer_address = AdvertisedPeerAddress(config.cluster, peer_bind, peer_port);
  state->cluster->SetAddresses(state->peer_address, HostOf(state->peer_address));
  LogInfo("cluster: joining as process ", config.process_index, " of ",
          config.cluster.num_processes, " through the coordinator at ",
          state->cluster->config().coordinator, " (peer address ", state->peer_address, ")");
  absl::StatusOr<std::shared_ptr<const ClusterView>> view =
      state->cluster->Join(state->backend->Devices(), state->identity.instance_id);
  if (!view.ok()) return fail(ExplainJoinFailure(view.status(), config.transport));
  const ProcessRecord& self = (*view)->processes[config.process_index];
  if (absl::Status s = state->backend->AssignGlobalIds(self.first_device_id, config.process_index);
      !s.ok()) {
    return fail(s);
  }
  if (absl::Status s = state->services->AttachCluster(**view); !s.ok()) return fail(s);
  state->cluster->StartHeartbeats();
  state->gate.SetReady();
  state->server->GetHealthCheckService()->SetServingStatus(true);
  LogInfo("cluster: formed at epoch ", (*view)->epoch, " with ", (*view)->num_processes,
          " processes and ", (*view)->AllDevices().size(), " devices; this daemon's are ids ",
          self.first_device_id, "..",
          self.first_device_id + static_cast<int64_t>(self.devices.size()) - 1);
  return absl::OkStatus();
}

void Daemon::Reload() {
  if (state_->authenticator) (void)state_->authenticator->Reload();
}

void Daemon::Drain() {
  absl::MutexLock lock(&state_->drain_mu);
  if (state_->drained) return;
  state_->drained = true;
  State& s = *state_;
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
