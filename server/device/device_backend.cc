#include "server/device/device_backend.h"

#include <unistd.h>

namespace placement::server {

ShardExport::~ShardExport() {
  if (fd >= 0) close(fd);
}

}  // namespace placement::server
