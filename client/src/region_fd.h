// Client side of the region fd hand-over (region_service.proto): sealed
// memfds and SCM_RIGHTS over the daemon's region socket. Not installed.
#ifndef PLACEMENT_CLIENT_SRC_REGION_FD_H_
#define PLACEMENT_CLIENT_SRC_REGION_FD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace placement::client {

// memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING), sized to `size_bytes`
// and sealed against shrinking and growing (the daemon requires
// F_SEAL_SHRINK). Returns the fd (the caller closes it).
// RESOURCE_EXHAUSTED when the memory cannot be had.
absl::StatusOr<int> CreateSealedMemfd(const std::string& name, int64_t size_bytes);

// Sends `fd` over the region socket `address` ("/path" or "@abstract") and
// returns the handle token the daemon answered. UNAVAILABLE when the socket
// cannot be reached; FAILED_PRECONDITION with the daemon's reason for "ERR".
absl::StatusOr<std::string> PassFd(const std::string& address, int fd);

// Redeems a view token on the region socket `address` ("V" + token + "\n")
// and returns the fds handed over, in order (the caller owns them).
// UNAVAILABLE when the socket cannot be reached or broke off; NOT_FOUND with
// the daemon's reason for "ERR" (an unknown, used or expired token).
absl::StatusOr<std::vector<int>> RedeemViewToken(const std::string& address,
                                                 const std::string& token);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_REGION_FD_H_
