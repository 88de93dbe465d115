// Client::Impl: what a Client holds (the channel every typed call uses, the
// target, the options, the metadata every call carries and the client's own
// session), and how each call is prepared. For the library's own sources; not installed.
#ifndef PLACEMENT_CLIENT_SRC_CLIENT_IMPL_H_
#define PLACEMENT_CLIENT_SRC_CLIENT_IMPL_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
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
  // What every call carries (Prepare adds it).
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

  // Every call the library makes starts here (the channel has no
  // interceptor: one cost every call 3-5 us on a 2-core VM): adds
  // `metadata` to `context` and sets the deadline now + `timeout` when
  // `timeout` is positive and finite.
  void Prepare(grpc::ClientContext* context, absl::Duration timeout) const;
  // Prepare with options.default_deadline.
  void PrepareContext(grpc::ClientContext* context) const {
    Prepare(context, options.default_deadline);
  }
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_CLIENT_IMPL_H_
