#include "placement/client/client.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/src/channel_security.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "placement/v1/daemon_service.grpc.pb.h"
#include "placement/v1/device_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;

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
      return absl::UnavailableError(absl::StrCat("cannot reach placementd at ", target, " within ",
                                                 absl::FormatDuration(options.connect_timeout)));
    }
  }
  return std::unique_ptr<Client>(new Client(target, options, std::move(channel)));
}

Client::Client(std::string target, ClientOptions options, std::shared_ptr<grpc::Channel> channel)
    : target_(std::move(target)), options_(options), channel_(std::move(channel)) {}

Client::~Client() = default;

void Client::PrepareContext(grpc::ClientContext* context) const {
  if (options_.default_deadline > absl::ZeroDuration()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + options_.default_deadline));
  }
}

absl::StatusOr<std::vector<pb::Device>> Client::ListDevices() const {
  grpc::ClientContext context;
  PrepareContext(&context);
  pb::ListDevicesResponse response;
  auto status = pb::DeviceService::NewStub(channel_)->ListDevices(&context, {}, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return std::vector<pb::Device>(response.devices().begin(), response.devices().end());
}

absl::StatusOr<pb::GetDeviceInfoResponse> Client::GetDeviceInfo() const {
  grpc::ClientContext context;
  PrepareContext(&context);
  pb::GetDeviceInfoResponse response;
  auto status = pb::DeviceService::NewStub(channel_)->GetDeviceInfo(&context, {}, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<pb::BatchSizeRecommendation> Client::GetBatchSizeRecommendation(
    const std::string& hardware) const {
  grpc::ClientContext context;
  PrepareContext(&context);
  pb::GetBatchSizeRecommendationRequest request;
  if (!hardware.empty()) request.set_hardware_name(hardware);
  pb::GetBatchSizeRecommendationResponse response;
  auto status =
      pb::DeviceService::NewStub(channel_)->GetBatchSizeRecommendation(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.recommendation();
}

absl::StatusOr<pb::ValidateBatchSizeResponse> Client::ValidateBatchSize(
    int64_t batch_size, bool warn_suboptimal, const std::string& hardware) const {
  grpc::ClientContext context;
  PrepareContext(&context);
  pb::ValidateBatchSizeRequest request;
  request.set_batch_size(batch_size);
  request.set_warn_suboptimal(warn_suboptimal);
  if (!hardware.empty()) request.set_hardware_name(hardware);
  pb::ValidateBatchSizeResponse response;
  auto status = pb::DeviceService::NewStub(channel_)->ValidateBatchSize(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<pb::GetStatusResponse> Client::GetStatus() const {
  grpc::ClientContext context;
  PrepareContext(&context);
  pb::GetStatusResponse response;
  auto status = pb::DaemonService::NewStub(channel_)->GetStatus(&context, {}, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

}  // namespace placement::client
