// Transport security for the gRPC port: TLS or mutual TLS from PEM files with
// gRPC's TLS server credentials, and the policy that decides when plaintext is
// allowed.
//
// Policy: plaintext is the default only on loopback addresses (127.0.0.0/8,
// ::1, localhost) and unix sockets. Any other address needs --tls_cert and
// --tls_key, or an explicit --allow_insecure (the daemon then logs a warning).
//
// Reload: gRPC's file watcher re-reads the files MakeServerCredentials names
// every `refresh_interval` (so a rotated certificate is served to new
// connections without a restart; established connections keep theirs). The
// daemon hands it the checked copies of ServedTlsFiles, never the operator's
// files, so a rotation that does not parse or pair up is refused there.
//
// Thread-safe (pure functions).
#ifndef PLACEMENT_SERVER_AUTH_TRANSPORT_SECURITY_H_
#define PLACEMENT_SERVER_AUTH_TRANSPORT_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"
#include "server/listen_address.h"

namespace placement::server {

struct TransportSecurityConfig {
  std::string tls_cert;       // PEM certificate chain; empty = plaintext
  std::string tls_key;        // PEM private key of tls_cert
  std::string tls_client_ca;  // PEM CA bundle; set = mutual TLS (client certificate required)
  absl::Duration refresh_interval = absl::Seconds(60);
  bool allow_insecure = false;  // plaintext on a non-loopback address

  bool tls() const { return !tls_cert.empty(); }
  bool mutual_tls() const { return !tls_client_ca.empty(); }
};

// True for unix sockets, 127.0.0.0/8, ::1 and "localhost".
bool IsLoopback(const ListenAddress& address);

// Checks the flags together: cert and key both or neither; client CA only
// with a cert; every named file readable and holding a PEM block; a refresh
// interval of at least one second; plaintext on a non-loopback address only
// with allow_insecure. INVALID_ARGUMENT naming the flag otherwise.
absl::Status ValidateTransportSecurity(const TransportSecurityConfig& config,
                                       const ListenAddress& address);

// The credentials to listen with. REQUIRES: ValidateTransportSecurity passed.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const TransportSecurityConfig& config);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_AUTH_TRANSPORT_SECURITY_H_
