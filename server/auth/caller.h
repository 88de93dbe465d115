// Caller: who is making an RPC, as the Authenticator established it -- the
// tenant every object the call creates belongs to, and the role that decides
// what it may see. A plain value; the core takes it to scope lookups.
//
// With authentication off, every caller is the single implicit tenant ""
// with role kUser: every object is then that tenant's, so all are visible.
#ifndef PLACEMENT_SERVER_AUTH_CALLER_H_
#define PLACEMENT_SERVER_AUTH_CALLER_H_

#include <string>

namespace placement::server {

enum class Role {
  kUser,   // sees and manages its own tenant's objects
  kAdmin,  // sees and manages every tenant's objects
  // Another daemon of the cluster: may call the daemon-to-daemon services
  // (ClusterService, PeerService); on the public ones, like kUser.
  kPeer,
};

struct Caller {
  std::string tenant;
  Role role = Role::kUser;
  // What authenticated the call, for logs: "token:ci-bot", "cert:trainer-1",
  // or "anonymous" with authentication off.
  std::string identity = "anonymous";
  // The session the call joined ("placement-session" metadata); empty = the
  // tensors the call creates are durable.
  std::string session_id;

  bool admin() const { return role == Role::kAdmin; }
  // Whether an object of `object_tenant` exists for this caller. Objects of
  // other tenants must look exactly like ids that do not exist (NOT_FOUND).
  bool Sees(const std::string& object_tenant) const { return admin() || object_tenant == tenant; }
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_AUTH_CALLER_H_
