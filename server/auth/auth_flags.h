// The daemon's transport-security and authentication flags (--tls_*,
// --allow_insecure, --auth_file), declared and read in auth_flags.cc. Only
// placementd reads them (DaemonConfigFromFlags), so only it links them.
#ifndef PLACEMENT_SERVER_AUTH_AUTH_FLAGS_H_
#define PLACEMENT_SERVER_AUTH_AUTH_FLAGS_H_

#include <string>

#include "server/auth/transport_security.h"

namespace placement::server {

// --tls_cert, --tls_key, --tls_client_ca, --tls_refresh_interval,
// --allow_insecure.
TransportSecurityConfig TransportSecurityFromFlags();
// --auth_file ("" = authentication off).
std::string AuthFileFromFlags();

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_AUTH_AUTH_FLAGS_H_
