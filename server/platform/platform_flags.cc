// --backend, and the daemon's reading of every platform's flags. Only
// placementd calls BackendOptionsFromFlags, so only placementd links this
// file (benchmarks define a --backend of their own).
#include <string>

#include "absl/flags/flag.h"
#include "server/platform/platform_registry.h"
#include "server/platform/platform_selection.h"

ABSL_FLAG(std::string, backend, "auto",
          "Device backend: auto (CUDA when a driver and GPUs are present, else CPU), cpu or cuda.");

namespace placement::server {

BackendOptions BackendOptionsFromFlags() {
  BackendOptions options;
  options.kind = absl::GetFlag(FLAGS_backend);
  for (const Platform* platform : PlatformRegistry::Global().ByPriority()) {
    platform->ReadFlags(&options.platforms);
  }
  return options;
}

}  // namespace placement::server
