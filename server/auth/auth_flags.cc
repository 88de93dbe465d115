#include "server/auth/auth_flags.h"

#include "absl/flags/flag.h"
#include "absl/time/time.h"

ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain for TLS on the gRPC port (with --tls_key). Re-read when the "
          "file changes (every --tls_refresh_interval).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: require and verify client certificates (mutual TLS).");
ABSL_FLAG(absl::Duration, tls_refresh_interval, absl::Seconds(60),
          "How often the TLS files are checked for changes.");
ABSL_FLAG(bool, allow_insecure, false,
          "Allow plaintext gRPC (and metrics HTTP) on a non-loopback address; logs a warning.");
ABSL_FLAG(std::string, auth_file, "",
          "Credentials file mapping bearer-token digests and client-certificate names to "
          "tenants and roles (docs/security.md). Set = every call must authenticate. Re-read on "
          "change and on SIGHUP.");

namespace placement::server {

TransportSecurityConfig TransportSecurityFromFlags() {
  TransportSecurityConfig config;
  config.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  config.tls_key = absl::GetFlag(FLAGS_tls_key);
  config.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  config.refresh_interval = absl::GetFlag(FLAGS_tls_refresh_interval);
  config.allow_insecure = absl::GetFlag(FLAGS_allow_insecure);
  return config;
}

std::string AuthFileFromFlags() { return absl::GetFlag(FLAGS_auth_file); }

}  // namespace placement::server
