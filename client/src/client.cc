#include "placement/client/client.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/src/channel_security.h"
#include "client/src/client_impl.h"
#include "client/src/convert.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "placement/v1/daemon_service.grpc.pb.h"
#include "placement/v1/device_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;

void Client::Impl::PrepareContext(grpc::ClientContext* context) const {
  if (options.default_deadline > absl::ZeroDuration()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + options.default_deadline));
  }
}

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
  absl::StatusOr<std::shared_ptr<grpc::Channel>> made = MakeChannel(target, options, args);
  if (!made.ok()) return made.status();
  std::shared_ptr<grpc::Channel> channel = *std::move(made);
  if (channel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create a channel to '", target, "'"));
  }
  if (options.connect_timeout > absl::ZeroDuration()) {
    if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + options.connect_timeout))) {
      // Over TLS a failed handshake (a certificate from another CA, a name
      // mismatch, a plaintext daemon) looks the same as no daemon: say so.
      return absl::UnavailableError(absl::StrCat(
          "cannot reach placementd at ", target, " within ",
          absl::FormatDuration(options.connect_timeout),
          options.tls ? " over TLS (or the TLS handshake failed: the daemon must serve TLS with a "
                        "certificate that chains to the trusted CA and names the target's host)"
                      : ""));
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->target = target;
  impl->options = options;
  impl->channel = std::move(channel);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() = default;

const std::string& Client::target() const { return impl_->target; }
const ClientOptions& Client::options() const { return impl_->options; }

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
    int64_t batch_size, bool warn_suboptimal, std::optional<HardwareType> hardware) const {
  grpc::ClientContext context;
  impl_->PrepareContext(&context);
  pb::ValidateBatchSizeRequest request;
  request.set_batch_size(batch_size);
  request.set_warn_suboptimal(warn_suboptimal);
  if (hardware.has_value()) request.set_hardware_type(ToProto(*hardware));
  pb::ValidateBatchSizeResponse response;
  auto status =
      pb::DeviceService::NewStub(impl_->channel)->ValidateBatchSize(&context, request, &response);
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
