#include "placement/client/session.h"

#include <algorithm>
#include <utility>

#include "client/src/call_context.h"
#include "client/src/client_impl.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "placement/v1/session_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;

absl::StatusOr<std::unique_ptr<Session>> Session::Open(const Client& client, absl::Duration ttl,
                                                       const std::string& name) {
  grpc::ClientContext context;
  client.impl().PrepareContext(&context);
  pb::OpenSessionRequest request;
  const int64_t nanos = absl::ToInt64Nanoseconds(ttl);
  request.mutable_ttl()->set_seconds(nanos / 1000000000);
  request.mutable_ttl()->set_nanos(static_cast<int32_t>(nanos % 1000000000));
  request.set_name(name);
  pb::OpenSessionResponse response;
  grpc::Status status =
      pb::SessionService::NewStub(client.impl().channel)->OpenSession(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  const absl::Duration granted = absl::Seconds(response.session().ttl().seconds()) +
                                 absl::Nanoseconds(response.session().ttl().nanos());
  return std::unique_ptr<Session>(new Session(client, response.session().id(), granted));
}

Session::Session(const Client& client, std::string id, absl::Duration ttl)
    : client_(client), id_(std::move(id)), ttl_(ttl) {
  renewer_ = std::thread([this] { RenewLoop(); });
}

Session::~Session() { (void)Close(); }

void Session::RenewLoop() {
  // A renewal ends within a third of the ttl (a stalled daemon must not
  // hold it past the lease); after a failure the next try comes within a
  // second, while the lease may still be running.
  const absl::Duration bound =
      std::min(ttl_ / 3, EffectiveTimeout(client_.options().default_deadline));
  const absl::Duration retry = std::min(absl::Seconds(1), ttl_ / 10);
  absl::Duration wait = ttl_ / 3;
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), wait);
    if (stopping_) return;
    grpc::ClientContext context;
    client_.impl().Prepare(&context, bound);
    renewing_ = &context;
    mu_.Unlock();
    pb::RenewSessionRequest request;
    request.set_session_id(id_);
    pb::RenewSessionResponse response;
    grpc::Status status = pb::SessionService::NewStub(client_.impl().channel)
                              ->RenewSession(&context, request, &response);
    mu_.Lock();
    renewing_ = nullptr;
    if (status.ok()) {
      renewals_.fetch_add(1);
      wait = ttl_ / 3;
    } else if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      lost_.store(true);  // expired: nothing left to renew
      return;
    } else {
      wait = retry;  // daemon restarting or stalled, the network: soon again
    }
  }
}

absl::StatusOr<int64_t> Session::Close() {
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return 0;
    closed_ = true;
    stopping_ = true;
    if (renewing_ != nullptr) renewing_->TryCancel();
  }
  if (renewer_.joinable()) renewer_.join();
  grpc::ClientContext context;
  client_.impl().PrepareContext(&context);
  pb::CloseSessionRequest request;
  request.set_session_id(id_);
  pb::CloseSessionResponse response;
  grpc::Status status = pb::SessionService::NewStub(client_.impl().channel)
                            ->CloseSession(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.deleted_tensors();
}

}  // namespace placement::client
