#include "server/auth/transport_security.h"

#include <arpa/inet.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace placement::server {
namespace {

// OK when `path` can be read and holds a PEM block; INVALID_ARGUMENT naming
// `flag` otherwise.
absl::Status CheckPemFile(absl::string_view flag, const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, "='", path, "' cannot be read"));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (!absl::StrContains(text.str(), "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "='", path, "' holds no PEM block (-----BEGIN ...)"));
  }
  return absl::OkStatus();
}

}  // namespace

bool IsLoopback(const ListenAddress& address) {
  if (address.is_unix) return true;
  if (address.host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, address.host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, address.host.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6);
  }
  return false;
}

absl::Status ValidateTransportSecurity(const TransportSecurityConfig& config,
                                       const ListenAddress& address) {
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key must be given together");
  }
  if (!config.tls_client_ca.empty() && config.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls_client_ca needs --tls_cert and --tls_key (mutual TLS is TLS first)");
  }
  if (config.refresh_interval < absl::Seconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_refresh_interval must be at least 1s, got ",
                     absl::FormatDuration(config.refresh_interval)));
  }
  if (config.tls()) {
    if (auto s = CheckPemFile("--tls_cert", config.tls_cert); !s.ok()) return s;
    if (auto s = CheckPemFile("--tls_key", config.tls_key); !s.ok()) return s;
    if (config.mutual_tls()) {
      if (auto s = CheckPemFile("--tls_client_ca", config.tls_client_ca); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (!IsLoopback(address) && !config.allow_insecure) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen=", address.ToGrpcUri(address.port),
                     " is not a loopback address: serve it with --tls_cert and --tls_key, or pass "
                     "--allow_insecure to accept plaintext from the network"));
  }
  return absl::OkStatus();
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const TransportSecurityConfig& config) {
  if (!config.tls()) return grpc::InsecureServerCredentials();
  const auto refresh = static_cast<unsigned int>(absl::ToInt64Seconds(config.refresh_interval));
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      config.tls_key, config.tls_cert, config.tls_client_ca, refresh);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (config.mutual_tls()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace placement::server
