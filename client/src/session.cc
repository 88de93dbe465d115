#include "placement/client/session.h"

#include <utility>

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
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), ttl_ / 3);
    if (stopping_) return;
    mu_.Unlock();
    grpc::ClientContext context;
    client_.impl().PrepareContext(&context);
    pb::RenewSessionRequest request;
    request.set_session_id(id_);
    pb::RenewSessionResponse response;
    grpc::Status status =
        pb::SessionService::NewStub(client_.impl().channel)->RenewSession(&context, request, &response);
    mu_.Lock();
    if (status.ok()) {
      renewals_.fetch_add(1);
    } else if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      lost_.store(true);  // expired: nothing left to renew
      return;
    }
    // Other errors (daemon restarting, network): try again next period.
  }
}

absl::StatusOr<int64_t> Session::Close() {
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return 0;
    closed_ = true;
    stopping_ = true;
  }
  if (renewer_.joinable()) renewer_.join();
  grpc::ClientContext context;
  client_.impl().PrepareContext(&context);
  pb::CloseSessionRequest request;
  request.set_session_id(id_);
  pb::CloseSessionResponse response;
  grpc::Status status =
      pb::SessionService::NewStub(client_.impl().channel)->CloseSession(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.deleted_tensors();
}

}  // namespace placement::client
