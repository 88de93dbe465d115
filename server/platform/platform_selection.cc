#include "server/platform/platform_selection.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/platform/platform_registry.h"

namespace placement::server {

PlatformConfig MakePlatformConfig(const BackendOptions& options, int32_t process_index) {
  PlatformConfig config;
  config.process_index = process_index;
  config.options = options.platforms;
  config.local_collectives = options.local_collectives;
  return config;
}

void RequestDevicesEverywhere(const DeviceRequest& request, PlatformOptions* options) {
  for (const Platform* platform : PlatformRegistry::Global().ByPriority()) {
    platform->RequestDevices(request, options);
  }
}

absl::StatusOr<BackendSelection> SelectPlatform(absl::string_view kind,
                                                const PlatformConfig& config) {
  const PlatformRegistry& registry = PlatformRegistry::Global();
  BackendSelection out;
  if (kind != "auto") {
    const Platform* platform = registry.Find(kind);
    if (platform == nullptr) {
      // "--backend must be auto, cpu or cuda, got 'tpu'"
      std::vector<std::string> names = registry.Names();
      std::sort(names.begin(), names.end());
      std::string choices = "auto";
      for (size_t i = 0; i < names.size(); ++i) {
        absl::StrAppend(&choices, i + 1 == names.size() ? " or " : ", ", names[i]);
      }
      return absl::InvalidArgumentError(
          absl::StrCat("--backend must be ", choices, ", got '", kind, "'"));
    }
    absl::StatusOr<std::unique_ptr<DeviceBackend>> backend = platform->CreateBackend(config);
    if (absl::IsFailedPrecondition(backend.status())) {
      return absl::FailedPreconditionError(
          absl::StrCat("--backend=", kind, " but no ", platform->device_noun(),
                       " is usable: ", backend.status().message()));
    }
    if (!backend.ok()) return backend.status();
    out.platform = platform;
    out.backend = std::move(*backend);
    out.note = absl::StrCat("using ", platform->DescribeDevices(*out.backend, config),
                            " (--backend=", kind, ")");
    return out;
  }
  std::vector<std::string> nouns, reasons;
  for (const Platform* platform : registry.ByPriority()) {
    absl::StatusOr<std::unique_ptr<DeviceBackend>> backend = platform->CreateBackend(config);
    // Bad settings are the operator's error, not a reason to fall back.
    if (absl::IsInvalidArgument(backend.status())) return backend.status();
    if (!backend.ok()) {
      nouns.emplace_back(platform->device_noun());
      reasons.emplace_back(backend.status().message());
      continue;
    }
    out.platform = platform;
    out.backend = std::move(*backend);
    const std::string devices = platform->DescribeDevices(*out.backend, config);
    out.note = reasons.empty()
                   ? absl::StrCat("using ", devices)
                   : absl::StrCat("no usable ", absl::StrJoin(nouns, " or "), " (",
                                  absl::StrJoin(reasons, "; "), "); falling back to ", devices);
    return out;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "--backend=auto but no registered platform is usable: ", absl::StrJoin(reasons, "; ")));
}

absl::StatusOr<BackendSelection> CreateBackend(const BackendOptions& options,
                                               int32_t process_index) {
  return SelectPlatform(options.kind, MakePlatformConfig(options, process_index));
}

absl::StatusOr<std::unique_ptr<CollectiveEngine>> CreateCollectiveEngine(
    DeviceBackend* backend, const PlatformConfig& config) {
  const Platform* platform = PlatformRegistry::Global().Find(backend->Name());
  if (platform == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("no registered platform made the '", backend->Name(), "' backend"));
  }
  return platform->CreateEngine(backend, config);
}

}  // namespace placement::server
