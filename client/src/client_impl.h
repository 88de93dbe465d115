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

namespace placement::client {

struct Client::Impl {
  std::string target;
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  // What the channel's interceptor adds to every call.
  std::shared_ptr<CallMetadata> metadata;
  // The session calls carry ("" = none) and, with SessionPolicy::kOpen, the
  // Session object that renews and finally closes it.
  std::string session_id;
  std::unique_ptr<Session> own_session;

  // Sets options.default_deadline (when positive) on `context`.
  void PrepareContext(grpc::ClientContext* context) const;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_CLIENT_IMPL_H_
