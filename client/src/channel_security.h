// The channel a Client dials: plaintext or TLS / mutual TLS credentials from
// ClientOptions, and an interceptor that adds the bearer token and the
// session id to every call's metadata (so each typed call, stream or unary,
// carries them without knowing). Not installed.
#ifndef PLACEMENT_CLIENT_SRC_CHANNEL_SECURITY_H_
#define PLACEMENT_CLIENT_SRC_CHANNEL_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "placement/client/client.h"

namespace placement::client {

// INVALID_ARGUMENT when a named PEM file cannot be read, or a client
// certificate comes without its key (or the reverse).
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& target,
                                                           const ClientOptions& options,
                                                           grpc::ChannelArguments args);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_CHANNEL_SECURITY_H_
