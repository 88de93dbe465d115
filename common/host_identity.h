// Which machine and which boot this process runs on, so a client can tell
// whether a daemon shares its memory (same-host shared-memory regions).
// Both ids are read once per call from the kernel; pure otherwise and
// thread-safe.
#ifndef PLACEMENT_COMMON_HOST_IDENTITY_H_
#define PLACEMENT_COMMON_HOST_IDENTITY_H_

#include <string>

namespace placement {

// /etc/machine-id (systemd's stable host id), else the hostname; "" when
// neither can be read.
std::string HostId();

// /proc/sys/kernel/random/boot_id: changes at every boot, shared by every
// container on the kernel; "" when unreadable.
std::string BootId();

}  // namespace placement

#endif  // PLACEMENT_COMMON_HOST_IDENTITY_H_
