// Who this daemon is: fixed at start, read by GetStatus and the logs.
#ifndef PLACEMENT_SERVER_DAEMON_IDENTITY_H_
#define PLACEMENT_SERVER_DAEMON_IDENTITY_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace placement::server {

struct DaemonIdentity {
  std::string version;
  std::string instance_id;  // random per process start
  absl::Time start_time;
  std::string backend;       // the platform: "cpu", "cuda"
  std::string backend_note;  // why this backend
  std::string listen_address;
  int32_t process_index = 0;
  // Same-host detection for regions (GetStatus): see host_identity.h.
  std::string host_id;
  std::string boot_id;
  std::string region_socket;  // "" when regions are off
};

// 16 random hex characters.
std::string NewInstanceId();

// The version compiled in (project version from CMake).
std::string PlacementVersion();

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DAEMON_IDENTITY_H_
