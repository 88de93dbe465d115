// gRPC front for placement.v1.SessionService: translates protos to
// SessionManager calls and back. No logic of its own. Thread-safe.
#ifndef PLACEMENT_SERVER_SERVICE_SESSION_HANDLER_H_
#define PLACEMENT_SERVER_SERVICE_SESSION_HANDLER_H_

#include "placement/v1/session_service.grpc.pb.h"
#include "server/service/call_gate.h"
#include "server/session/session_manager.h"

namespace placement::server {

class SessionHandler final : public placement::v1::SessionService::CallbackService {
 public:
  // REQUIRES: sessions and gate outlive the handler.
  SessionHandler(SessionManager* sessions, CallGate* gate);
  ~SessionHandler() override;

  grpc::ServerUnaryReactor* OpenSession(grpc::CallbackServerContext* context,
                                        const placement::v1::OpenSessionRequest* request,
                                        placement::v1::OpenSessionResponse* response) override;
  grpc::ServerUnaryReactor* RenewSession(grpc::CallbackServerContext* context,
                                         const placement::v1::RenewSessionRequest* request,
                                         placement::v1::RenewSessionResponse* response) override;
  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext* context,
                                         const placement::v1::CloseSessionRequest* request,
                                         placement::v1::CloseSessionResponse* response) override;
  grpc::ServerUnaryReactor* PersistTensors(
      grpc::CallbackServerContext* context, const placement::v1::PersistTensorsRequest* request,
      placement::v1::PersistTensorsResponse* response) override;
  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* context,
                                         const placement::v1::ListSessionsRequest* request,
                                         placement::v1::ListSessionsResponse* response) override;

 private:
  SessionManager* sessions_;
  CallGate* gate_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_SESSION_HANDLER_H_
