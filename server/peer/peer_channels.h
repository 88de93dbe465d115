// PeerChannels: the gRPC channels a daemon uses to reach the other daemons
// of its cluster (the coordinator's ClusterService, every daemon's
// PeerService), one per address, with the daemon's own credentials:
//   - with --tls_cert: TLS verified against --tls_client_ca (the cluster's
//     CA), presenting --tls_cert/--tls_key as the client certificate
//     (mutual TLS); the files are watched and reloaded like the server's;
//     --peer_tls_server_name overrides the name checked in peers'
//     certificates (certificates issued for a DNS name, dialled by IP);
//   - otherwise plaintext;
//   - with --peer_token_file: "authorization: Bearer TOKEN" on every call
//     (for peers that run --auth_file without client certificates).
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_PEER_PEER_CHANNELS_H_
#define PLACEMENT_SERVER_PEER_PEER_CHANNELS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "server/auth/transport_security.h"

namespace placement::server {

struct PeerSecurity {
  TransportSecurityConfig transport;  // the daemon's --tls_* flags
  std::string server_name_override;   // --peer_tls_server_name
  std::string token;                  // contents of --peer_token_file, trimmed
};

class PeerChannels {
 public:
  explicit PeerChannels(PeerSecurity security) : security_(std::move(security)) {}

  // The channel to `address` (host:port), created on first use.
  std::shared_ptr<grpc::Channel> Get(const std::string& address);

  // Prepares a call: credentials metadata and `timeout` as its deadline.
  void Prepare(grpc::ClientContext* context, absl::Duration timeout) const;

 private:
  std::shared_ptr<grpc::ChannelCredentials> Credentials() const;

  const PeerSecurity security_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PEER_PEER_CHANNELS_H_
