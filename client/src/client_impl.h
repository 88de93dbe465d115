// Client::Impl: what a Client holds (the channel every typed call uses, the
// target, the options, the metadata every call carries and the client's own
// session). For the library's own sources; not installed.
#ifndef PLACEMENT_CLIENT_SRC_CLIENT_IMPL_H_
#define PLACEMENT_CLIENT_SRC_CLIENT_IMPL_H_

#include <memory>
#include <string>

#include "client/src/channel_security.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "placement/client/client.h"
#include "placement/client/session.h"
#include "placement/v1/collective_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"

namespace placement::client {

struct Client::Impl {
  std::string target;
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  // What the channel's interceptor adds to every call.
  std::shared_ptr<CallMetadata> metadata;
  // Stubs of the services small, frequent calls use (a collective per
  // gradient bucket, Describe, Delete), made once with the channel: a stub
  // per call registers every method of its service with the channel again.
  // Set by Client::Connect; thread-safe, as gRPC stubs are.
  std::unique_ptr<placement::v1::CollectiveService::Stub> collective_stub;
  std::unique_ptr<placement::v1::TensorService::Stub> tensor_stub;
  // The session calls carry ("" = none) and, with SessionPolicy::kOpen, the
  // Session object that renews and finally closes it.
  std::string session_id;
  std::unique_ptr<Session> own_session;

  // Sets options.default_deadline (when positive) on `context`.
  void PrepareContext(grpc::ClientContext* context) const;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_CLIENT_IMPL_H_
