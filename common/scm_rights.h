// SCM_RIGHTS: the fds a unix socket message carries, for both ends of the
// region socket (server/region/fd_passing_listener.cc, client/src/
// region_fd.cc). Pure functions over msghdr; thread-safe.
#ifndef PLACEMENT_COMMON_SCM_RIGHTS_H_
#define PLACEMENT_COMMON_SCM_RIGHTS_H_

#include <sys/socket.h>

#include <vector>

#include "absl/types/span.h"

namespace placement {

// Every fd the control messages of a received `msg` carried, in order (the
// receiver owns them).
std::vector<int> ReceivedFds(const msghdr& msg);

// Attaches `fds` to `msg` as one SCM_RIGHTS control message kept in
// `control` (which must outlive the send). No fds: no control message.
void AttachFds(absl::Span<const int> fds, std::vector<char>* control, msghdr* msg);

}  // namespace placement

#endif  // PLACEMENT_COMMON_SCM_RIGHTS_H_
