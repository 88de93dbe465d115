// NetworkNamespaces: separate "hosts" for cluster tests on one machine --
// N network namespaces, each joined by a veth pair to a bridge in the test's
// own namespace, with addresses 10.A.B.1..N/24 (the bridge is 10.A.B.254),
// so daemons inside them talk over real, separate interfaces as separate
// nodes would. Names and the subnet derive from the test's pid, so parallel
// tests do not collide. Everything is removed on destruction.
//
// Needs root and iproute2; Create says why when namespaces cannot be made
// (the caller skips with that message).
//
// Not thread-safe.
#ifndef PLACEMENT_TESTS_TESTING_NETWORK_NAMESPACES_H_
#define PLACEMENT_TESTS_TESTING_NETWORK_NAMESPACES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace placement::testing {

class NetworkNamespaces {
 public:
  static absl::StatusOr<std::unique_ptr<NetworkNamespaces>> Create(int count);
  // Whether namespaces can be made on this machine (tried once per process:
  // not as root, no iproute2, or a container without CAP_SYS_ADMIN says no),
  // and why not. Tests that need them skip with this status.
  static const absl::Status& Usable();
  ~NetworkNamespaces();

  int size() const { return static_cast<int>(names_.size()); }
  const std::string& name(int i) const { return names_[i]; }
  // The address of namespace i ("10.A.B.(i+1)").
  const std::string& address(int i) const { return addresses_[i]; }
  // {"/usr/sbin/ip", "netns", "exec", name(i)}: runs a command inside
  // namespace i (the path resolved, as execv needs).
  std::vector<std::string> ExecPrefix(int i) const;
  // Cuts namespace i off the bridge (a partition) or joins it again.
  absl::Status SetLinkUp(int i, bool up);

 private:
  NetworkNamespaces() = default;
  std::string bridge_;
  std::vector<std::string> names_;
  std::vector<std::string> host_ends_;
  std::vector<std::string> addresses_;
};

}  // namespace placement::testing

#endif  // PLACEMENT_TESTS_TESTING_NETWORK_NAMESPACES_H_
