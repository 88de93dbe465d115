#include "placement/client/client.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/src/call_context.h"
#include "client/src/channel_security.h"
#include "client/src/client_impl.h"
#include "client/src/connect_probe.h"
#include "client/src/convert.h"
#include "client/src/region_pool.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "placement/v1/daemon_service.grpc.pb.h"
#include "placement/v1/device_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;

void Client::Impl::Prepare(grpc::ClientContext* context, absl::Duration timeout) const {
  // Held for the loop: a concurrent CallMetadata::Set replaces the entries.
  const std::shared_ptr<const CallMetadata::Entries> entries = metadata->Get();
  for (const auto& [key, value] : *entries) context->AddMetadata(key, value);
  SetTimeout(timeout, context);
}

namespace {

// The TLS hint of a connection that failed or timed out.
std::string TlsHint(const ClientOptions& options) {
  return options.tls ? " over TLS (or the TLS handshake failed: the daemon must serve TLS with a "
                       "certificate that chains to the trusted CA and names the target's host)"
                     : "";
}

// After gRPC reports a failed connection to a target where something does
// listen, how long its own reconnection (after its 1 s backoff) may take
// before the failure stands: a failed TLS handshake fails within this, a
// one-off failure under load recovers.
constexpr absl::Duration kListenerGrace = absl::Seconds(5);

// Waits until `channel` is connected. When gRPC reports a failed attempt and
// nothing listens at `target` (refused, unreachable, no such socket) the wait
// ends at once: gRPC would retry with backoff until the deadline, and a
// caller told nothing is listening should not wait for it. When something
// does listen, gRPC's reconnection gets kListenerGrace.
absl::Status WaitForConnected(grpc::Channel& channel, const std::string& target,
                              const ClientOptions& options) {
  const absl::Time deadline = absl::Now() + options.connect_timeout;
  const absl::Status failed = absl::UnavailableError(
      absl::StrCat("cannot reach placementd at ", target,
                   ": the connection failed (nothing listens there, or it refused or is "
                   "unreachable)",
                   TlsHint(options)));
  absl::Time give_up = deadline;
  bool probed = false;
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE && !probed) {
      probed = true;
      const absl::Duration probe =
          std::clamp(deadline - absl::Now(), absl::Milliseconds(50), absl::Seconds(1));
      if (NothingListens(target, probe)) return failed;
      give_up = std::min(deadline, absl::Now() + kListenerGrace);
    }
    if (!channel.WaitForStateChange(state, absl::ToChronoTime(give_up))) {
      if (probed) return failed;  // an attempt failed: say so, not only "within"
      return absl::UnavailableError(absl::StrCat("cannot reach placementd at ", target, " within ",
                                                 absl::FormatDuration(options.connect_timeout),
                                                 TlsHint(options)));
    }
    state = channel.GetState(/*try_to_connect=*/true);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& target,
                                                        const ClientOptions& options) {
  if (target.empty()) return absl::InvalidArgumentError("target must not be empty");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  args.SetMaxSendMessageSize(options.max_send_message_bytes);
  if (options.keepalive_time > absl::ZeroDuration()) {
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS,
                static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_time)));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                static_cast<int>(absl::ToInt64Milliseconds(options.keepalive_timeout)));
  }
  std::shared_ptr<CallMetadata> metadata = MetadataOf(options);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> made = MakeChannel(target, options, args);
  if (!made.ok()) return made.status();
  std::shared_ptr<grpc::Channel> channel = *std::move(made);
  if (channel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create a channel to '", target, "'"));
  }
  if (options.connect_timeout > absl::ZeroDuration()) {
    if (absl::Status connected = WaitForConnected(*channel, target, options); !connected.ok()) {
      return connected;
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->target = target;
  impl->options = options;
  impl->channel = std::move(channel);
  impl->collective_stub = pb::CollectiveService::NewStub(impl->channel);
  impl->tensor_stub = pb::TensorService::NewStub(impl->channel);
  impl->metadata = metadata;
  impl->session_id = options.session_id;
  std::unique_ptr<Client> client(new Client(std::move(impl)));
  // A session needs the daemon: with connect_timeout zero Connect does not
  // wait for it, and opens none.
  if (options.session_id.empty() && options.session_policy == SessionPolicy::kOpen &&
      options.connect_timeout > absl::ZeroDuration()) {
    absl::StatusOr<std::unique_ptr<Session>> session =
        Session::Open(*client, options.session_ttl, absl::StrCat("client pid ", getpid()));
    if (!session.ok()) return session.status();
    client->impl_->session_id = (*session)->id();
    metadata->Set("placement-session", (*session)->id());
    client->impl_->own_session = *std::move(session);
  }
  return client;
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

// Unregisters the staging regions of TransferPath::kAuto while the channel
// still works, then closes the client's own session (freeing what it holds).
Client::~Client() {
  RegionPool::Release(impl_->channel.get());
  impl_->own_session.reset();
}

const std::string& Client::target() const { return impl_->target; }
const ClientOptions& Client::options() const { return impl_->options; }
const std::string& Client::session_id() const { return impl_->session_id; }

absl::StatusOr<std::vector<Device>> Client::ListDevices() const {
  grpc::ClientContext context;
  impl_->PrepareContext(&context);
  pb::ListDevicesResponse response;
  auto status = pb::DeviceService::NewStub(impl_->channel)->ListDevices(&context, {}, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  std::vector<Device> devices;
  devices.reserve(response.devices_size());
  for (const pb::Device& d : response.devices()) devices.push_back(FromProto(d));
  return devices;
}

absl::StatusOr<DeviceInfo> Client::GetDeviceInfo() const {
  grpc::ClientContext context;
  impl_->PrepareContext(&context);
  pb::GetDeviceInfoResponse response;
  auto status = pb::DeviceService::NewStub(impl_->channel)->GetDeviceInfo(&context, {}, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(response);
}

absl::StatusOr<BatchSizeRecommendation> Client::GetBatchSizeRecommendation(
    std::optional<HardwareType> hardware) const {
  grpc::ClientContext context;
  impl_->PrepareContext(&context);
  pb::GetBatchSizeRecommendationRequest request;
  if (hardware.has_value()) request.set_hardware_type(ToProto(*hardware));
  pb::GetBatchSizeRecommendationResponse response;
  auto status = pb::DeviceService::NewStub(impl_->channel)
                    ->GetBatchSizeRecommendation(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(response.recommendation());
}

absl::StatusOr<BatchSizeValidation> Client::ValidateBatchSize(
    int64_t batch_size, SuboptimalWarning warn_suboptimal,
    std::optional<HardwareType> hardware) const {
  grpc::ClientContext context;
  impl_->PrepareContext(&context);
  pb::ValidateBatchSizeRequest request;
  request.set_batch_size(batch_size);
  request.set_warn_suboptimal(warn_suboptimal == SuboptimalWarning::kWarn);
  if (hardware.has_value()) request.set_hardware_type(ToProto(*hardware));
  pb::ValidateBatchSizeResponse response;
  auto status =
      pb::DeviceService::NewStub(impl_->channel)->ValidateBatchSize(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(response);
}

absl::StatusOr<std::vector<StreamStatus>> Client::ListStreams() const {
  grpc::ClientContext context;
  impl_->PrepareContext(&context);
  pb::ListStreamsResponse response;
  auto status = pb::DaemonService::NewStub(impl_->channel)->ListStreams(&context, {}, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProtos(response.streams());
}

absl::StatusOr<MemoryTrim> Client::TrimMemory(const std::string& tenant) const {
  grpc::ClientContext context;
  impl_->PrepareContext(&context);
  pb::TrimMemoryRequest request;
  request.set_tenant(tenant);
  pb::TrimMemoryResponse response;
  auto status =
      pb::DaemonService::NewStub(impl_->channel)->TrimMemory(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(response);
}

absl::StatusOr<DaemonStatus> Client::GetStatus() const {
  grpc::ClientContext context;
  impl_->PrepareContext(&context);
  pb::GetStatusResponse response;
  auto status = pb::DaemonService::NewStub(impl_->channel)->GetStatus(&context, {}, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(response);
}

}  // namespace placement::client
