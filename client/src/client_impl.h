// Client::Impl: what a Client holds (the channel every typed call uses, the
// target and the options). For the library's own sources; not installed.
#ifndef PLACEMENT_CLIENT_SRC_CLIENT_IMPL_H_
#define PLACEMENT_CLIENT_SRC_CLIENT_IMPL_H_

#include <memory>
#include <string>

#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "placement/client/client.h"

namespace placement::client {

struct Client::Impl {
  std::string target;
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;

  // Sets options.default_deadline (when positive) on `context`.
  void PrepareContext(grpc::ClientContext* context) const;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_CLIENT_IMPL_H_
