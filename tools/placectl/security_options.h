// placectl's flags for a secured daemon (docs/security.md), turned into the
// client library's ClientOptions before anything is dialled:
//   --tls                 speak TLS; implied by every --tls_* flag. The
//                         daemon's certificate is checked against --tls_ca,
//                         or the system roots without it.
//   --tls_ca=PEM          CA certificate(s) the daemon's certificate must chain to.
//   --tls_cert=PEM, --tls_key=PEM
//                         a client certificate and its key (mutual TLS); both or neither.
//   --tls_server_name=N   the name checked in the daemon's certificate instead
//                         of the target's host (dialling by IP, tunnels).
//   --token=T, --token_file=PATH, else $PLACEMENT_TOKEN
//                         sent as "authorization: Bearer T" on every call.
//   --session=ID          join session ID: every call carries
//                         "placement-session: ID", so what it creates belongs
//                         to that session and is freed with it.
// Errors: INVALID_ARGUMENT for a usage error (exit 2: conflicting flags, a
// token or session id that cannot be sent as metadata), NOT_FOUND for a file
// that cannot be read (exit 1), each naming the flag.
#ifndef PLACEMENT_TOOLS_PLACECTL_SECURITY_OPTIONS_H_
#define PLACEMENT_TOOLS_PLACECTL_SECURITY_OPTIONS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "placement/client/client.h"

namespace placement::placectl {

// Fills `options`' tls*, token and session_id fields from the parsed flags
// and the environment (`getenv` of PLACEMENT_TOKEN).
absl::Status ApplySecurityFlags(client::ClientOptions& options);

// True for a unix socket or a loopback host (127.0.0.0/8, ::1, localhost):
// the only targets where a token may travel without TLS unwarned.
bool IsLocalTarget(absl::string_view target);

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_SECURITY_OPTIONS_H_
