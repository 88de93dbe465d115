#include "server/service/session_handler.h"

#include <string>
#include <vector>

#include "common/status_macros.h"
#include "server/service/unary.h"
#include "server/tensor/list_page.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;

void SessionToProto(const SessionSnapshot& session, pb::SessionInfo* out) {
  out->set_id(session.id);
  out->set_tenant(session.tenant);
  out->set_name(session.name);
  const int64_t ttl = absl::ToInt64Nanoseconds(session.ttl);
  out->mutable_ttl()->set_seconds(ttl / 1000000000);
  out->mutable_ttl()->set_nanos(static_cast<int32_t>(ttl % 1000000000));
  const timespec expire = absl::ToTimespec(session.expire_time);
  out->mutable_expire_time()->set_seconds(expire.tv_sec);
  out->mutable_expire_time()->set_nanos(static_cast<int32_t>(expire.tv_nsec));
  out->set_num_tensors(session.num_tensors);
}

}  // namespace

grpc::ServerUnaryReactor* SessionHandler::OpenSession(grpc::CallbackServerContext* context,
                                                      const pb::OpenSessionRequest* request,
                                                      pb::OpenSessionResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    const absl::Duration ttl =
        absl::Seconds(request->ttl().seconds()) + absl::Nanoseconds(request->ttl().nanos());
    ASSIGN_OR_RETURN(SessionSnapshot session, sessions_->Open(caller, ttl, request->name()));
    SessionToProto(session, response->mutable_session());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* SessionHandler::RenewSession(grpc::CallbackServerContext* context,
                                                       const pb::RenewSessionRequest* request,
                                                       pb::RenewSessionResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    ASSIGN_OR_RETURN(SessionSnapshot session, sessions_->Renew(caller, request->session_id()));
    SessionToProto(session, response->mutable_session());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* SessionHandler::CloseSession(grpc::CallbackServerContext* context,
                                                       const pb::CloseSessionRequest* request,
                                                       pb::CloseSessionResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t deleted, sessions_->Close(caller, request->session_id()));
    response->set_deleted_tensors(deleted);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* SessionHandler::PersistTensors(grpc::CallbackServerContext* context,
                                                         const pb::PersistTensorsRequest* request,
                                                         pb::PersistTensorsResponse* /*response*/) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    return sessions_->Persist(caller, std::vector<std::string>(request->tensor_ids().begin(),
                                                               request->tensor_ids().end()));
  });
}

grpc::ServerUnaryReactor* SessionHandler::ListSessions(grpc::CallbackServerContext* context,
                                                       const pb::ListSessionsRequest* request,
                                                       pb::ListSessionsResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    const std::vector<SessionSnapshot> sessions = sessions_->List(caller);  // sorted by id
    std::vector<std::string> ids;
    for (const SessionSnapshot& session : sessions) ids.push_back(session.id);
    ASSIGN_OR_RETURN(KeyPage page, PageOfKeys(ids, request->page_size(), request->page_token()));
    for (size_t i = page.begin; i < page.end; ++i) {
      SessionToProto(sessions[i], response->add_sessions());
    }
    response->set_next_page_token(page.next_page_token);
    return absl::OkStatus();
  });
}

// Out of line: constructing or destroying the handler instantiates gRPC's
// handler templates for each of its methods, in this file only.
SessionHandler::SessionHandler(SessionManager* sessions, CallGate* gate)
    : sessions_(sessions), gate_(gate) {}
SessionHandler::~SessionHandler() = default;

}  // namespace placement::server
