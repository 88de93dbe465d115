// The session manager's flags (--session_sweep_interval), declared and read
// in session_flags.cc; only placementd links them.
#ifndef PLACEMENT_SERVER_SESSION_SESSION_FLAGS_H_
#define PLACEMENT_SERVER_SESSION_SESSION_FLAGS_H_

#include "server/session/session_manager.h"

namespace placement::server {

SessionOptions SessionOptionsFromFlags();

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SESSION_SESSION_FLAGS_H_
