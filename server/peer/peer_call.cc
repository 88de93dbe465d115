#include "server/peer/peer_call.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "server/cluster/fan_out.h"

namespace placement::server {

PeerCall::PeerCall(PeerChannels* channels, Cluster* cluster, int32_t process,
                   absl::Duration timeout)
    : cluster_(cluster), process_(process) {
  channels->Prepare(&context_, timeout);
  stub_ = placement::v1::PeerService::NewStub(channels->Get(cluster_->PeerAddress(process)));
  grpc::ClientContext* context = &context_;
  guard_ =
      std::make_unique<Cluster::CallGuard>(cluster_, process, [context] { context->TryCancel(); });
}

PeerCall::~PeerCall() { guard_.reset(); }

absl::Status PeerCall::Finish(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // The daemon's own answer keeps its code and text.
  if (context_.GetServerTrailingMetadata().count("placement-peer-answer") > 0) {
    return FromGrpcStatus(status);
  }
  const grpc::StatusCode code = status.error_code();
  const bool transport = code == grpc::StatusCode::CANCELLED ||
                         code == grpc::StatusCode::UNAVAILABLE ||
                         (code == grpc::StatusCode::DEADLINE_EXCEEDED &&
                          status.error_message() == "Deadline Exceeded");
  if (!transport) return FromGrpcStatus(status);
  absl::Status failed = cluster_->CheckAlive({process_});
  if (failed.ok()) {
    const std::string who = cluster_->view()->Describe(process_);
    failed = code == grpc::StatusCode::DEADLINE_EXCEEDED
                 ? absl::DeadlineExceededError(absl::StrCat(who, " did not answer in time"))
                 : absl::UnavailableError(absl::StrCat(who, ": ", status.error_message()));
  }
  MarkUnreachable(failed, process_);
  return failed;
}

}  // namespace placement::server
