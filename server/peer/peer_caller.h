// PeerCallerInfo: who a cluster operation is for, carried to the daemons
// that do part of it (PeerService's PeerCaller): they apply the same tenant
// checks and quotas, and the results join the same session.
#ifndef PLACEMENT_SERVER_PEER_PEER_CALLER_H_
#define PLACEMENT_SERVER_PEER_PEER_CALLER_H_

#include <string>

#include "server/auth/caller.h"

namespace placement::server {

struct PeerCallerInfo {
  std::string tenant;
  bool admin = false;
  std::string session_id;

  static PeerCallerInfo Of(const Caller& caller) {
    return PeerCallerInfo{caller.tenant, caller.admin(), caller.session_id};
  }
  Caller AsCaller() const {
    Caller c;
    c.tenant = tenant;
    c.role = admin ? Role::kAdmin : Role::kUser;
    c.identity = "peer";
    c.session_id = session_id;
    return c;
  }
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PEER_PEER_CALLER_H_
