#include "common/scm_rights.h"

#include <cstring>

namespace placement {

std::vector<int> ReceivedFds(const msghdr& msg) {
  std::vector<int> fds;
  for (const cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr;
       c = CMSG_NXTHDR(const_cast<msghdr*>(&msg), const_cast<cmsghdr*>(c))) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.push_back(fd);
    }
  }
  return fds;
}

void AttachFds(absl::Span<const int> fds, std::vector<char>* control, msghdr* msg) {
  if (fds.empty()) return;
  control->assign(CMSG_SPACE(sizeof(int) * fds.size()), 0);
  msg->msg_control = control->data();
  msg->msg_controllen = control->size();
  cmsghdr* c = CMSG_FIRSTHDR(msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
}

}  // namespace placement
