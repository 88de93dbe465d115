// --ready_file: the file placementd writes once it serves, for scripts and
// tests that start it on port 0 (docs/operations.md). Written atomically
// (a temporary beside it, then rename), so a reader sees all of it or none.
//
// Pure functions; thread-compatible.
#ifndef PLACEMENT_SERVER_READY_FILE_H_
#define PLACEMENT_SERVER_READY_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace placement::server {

// What the file says: line 1 the gRPC address; then, when set,
// "metrics=URL" and "peer=HOST:PORT" (what other daemons dial; process
// 0's is the --coordinator of the others).
struct ReadyFileContents {
  std::string address;
  std::string metrics_url;
  std::string peer_address;
};

// Whether `path` can be written, checked before the daemon starts anything
// by creating (and removing) the temporary the write will use.
// FAILED_PRECONDITION naming --ready_file and the reason ("the directory
// /x does not exist") otherwise.
absl::Status CheckReadyFile(const std::string& path);

// Writes `contents` to `path` atomically. FAILED_PRECONDITION naming the
// path when it cannot.
absl::Status WriteReadyFile(const std::string& path, const ReadyFileContents& contents);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_READY_FILE_H_
