// TLS key material checks: whether PEM text holds a certificate chain and a
// private key that belong together, and whether a CA bundle parses, with
// OpenSSL -- what gRPC would otherwise find out only at the first handshake
// with the material (every new connection failing then).
//
// Thread-safe (pure functions).
#ifndef PLACEMENT_SERVER_AUTH_TLS_KEY_PAIR_H_
#define PLACEMENT_SERVER_AUTH_TLS_KEY_PAIR_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace placement::server {

// OK when `cert_pem` holds at least one X.509 certificate, `key_pem` a
// private key, and the key is the first certificate's (X509_check_private_key).
// INVALID_ARGUMENT otherwise, naming `cert_name` / `key_name` (the flags or
// files) and what is wrong; key bytes are never echoed.
absl::Status CheckKeyCertPair(absl::string_view cert_pem, absl::string_view key_pem,
                              absl::string_view cert_name, absl::string_view key_name);

// OK when `ca_pem` holds at least one X.509 certificate and nothing that
// fails to parse as one; INVALID_ARGUMENT naming `name` otherwise.
absl::Status CheckCaBundle(absl::string_view ca_pem, absl::string_view name);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_AUTH_TLS_KEY_PAIR_H_
