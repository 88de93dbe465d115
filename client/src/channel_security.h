// The channel a Client dials (plaintext or TLS / mutual TLS credentials from
// ClientOptions) and the metadata every call on it carries (bearer token,
// session id; Client::Impl::Prepare adds it to each call). Not installed.
//
// CallMetadata is thread-safe: the client's own session id is set once the
// session is open, after the channel exists (and the session's renewal
// thread may already be making calls).
#ifndef PLACEMENT_CLIENT_SRC_CHANNEL_SECURITY_H_
#define PLACEMENT_CLIENT_SRC_CHANNEL_SECURITY_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "placement/client/client.h"

namespace placement::client {

class CallMetadata {
 public:
  using Entries = std::vector<std::pair<std::string, std::string>>;
  // Adds or replaces `key` on every later call.
  void Set(const std::string& key, std::string value);
  // What a call starting now sends: a snapshot, shared by the calls that
  // start before the next Set (no copy of the strings per call).
  std::shared_ptr<const Entries> Get() const;

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const Entries> entries_ ABSL_GUARDED_BY(mu_) = std::make_shared<Entries>();
};

// The metadata ClientOptions asks for (token, session_id).
std::shared_ptr<CallMetadata> MetadataOf(const ClientOptions& options);

// INVALID_ARGUMENT when a named PEM file cannot be read, or a client
// certificate comes without its key (or the reverse).
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& target,
                                                           const ClientOptions& options,
                                                           grpc::ChannelArguments args);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_CHANNEL_SECURITY_H_
