#include "server/device/device_backend.h"

#include <unistd.h>

namespace placement::server {
namespace {

thread_local int outside_writer_depth = 0;

}  // namespace

OutsideWriterScope::OutsideWriterScope() { ++outside_writer_depth; }
OutsideWriterScope::~OutsideWriterScope() { --outside_writer_depth; }
bool OutsideWriterScope::Active() { return outside_writer_depth > 0; }

ShardExport::~ShardExport() {
  if (fd >= 0) close(fd);
}

}  // namespace placement::server
