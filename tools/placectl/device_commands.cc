// placectl devices | info | status | batch-size | validate-batch-size.
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tools/placectl/commands.h"
#include "tools/placectl/output.h"

ABSL_FLAG(std::string, hardware, "",
          "batch-size / validate-batch-size: hardware to ask about (h100, tpu_v5e, ...); "
          "default: the detected hardware.");
ABSL_FLAG(bool, warn_suboptimal, true,
          "validate-batch-size: warn when below the critical batch size (the seed's default).");

namespace placement::placectl {

int RunDevices(const client::Client& client, const GlobalOptions& options, const Args&) {
  auto devices = client.ListDevices();
  if (!devices.ok()) return ReportError(devices.status());
  if (options.json) {
    std::printf("%s\n", ToJson(*devices).c_str());
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {
      {"ID", "PLATFORM", "KIND", "HARDWARE", "IN USE", "LIMIT", "NODE"}};
  for (const auto& d : *devices) {
    rows.push_back({absl::StrCat(d.id), d.platform, d.device_kind,
                    std::string(client::HardwareTypeName(d.hardware_type)),
                    HumanBytes(d.memory_in_use_bytes), HumanBytes(d.memory_limit_bytes),
                    absl::StrCat(d.process_index)});
  }
  std::printf("%s", FormatTable(rows).c_str());
  return 0;
}

int RunInfo(const client::Client& client, const GlobalOptions& options, const Args&) {
  auto info = client.GetDeviceInfo();
  if (!info.ok()) return ReportError(info.status());
  if (options.json) {
    std::printf("%s\n", ToJson(*info).c_str());
    return 0;
  }
  std::printf("num_devices:   %lld\nhardware_type: %s\nplatforms:     %s\ndevice_kinds:  %s\n",
              static_cast<long long>(info->num_devices),
              std::string(client::HardwareTypeName(info->hardware_type)).c_str(),
              absl::StrJoin(info->platforms, ", ").c_str(),
              absl::StrJoin(info->device_kinds, ", ").c_str());
  for (const auto& d : info->devices) {
    std::printf("  device %lld: %s (%s)\n", static_cast<long long>(d.id), d.platform.c_str(),
                d.device_kind.c_str());
  }
  return 0;
}

int RunStatus(const client::Client& client, const GlobalOptions& options, const Args&) {
  auto status = client.GetStatus();
  if (!status.ok()) return ReportError(status.status());
  if (options.json) {
    std::printf("%s\n", ToJson(*status).c_str());
    return 0;
  }
  std::printf(
      "version:      %s\nbackend:      %s (%s)\ninstance:     %s\naddress:      %s\nuptime:       "
      "%llds\ndevices:      %lld\nmeshes:       %lld\ntensors:      %lld\nbytes in use: %s\n"
      "serving:      %s\n",
      status->version.c_str(), status->backend.c_str(), status->backend_note.c_str(),
      status->instance_id.c_str(), status->listen_address.c_str(),
      static_cast<long long>(absl::ToInt64Seconds(status->uptime)),
      static_cast<long long>(status->num_devices), static_cast<long long>(status->num_meshes),
      static_cast<long long>(status->num_tensors), HumanBytes(status->device_bytes_in_use).c_str(),
      status->serving ? "yes" : "draining");
  return 0;
}

// --hardware as a HardwareType; nullopt when unset (the detected type).
absl::StatusOr<std::optional<client::HardwareType>> HardwareFlag() {
  std::string name = absl::GetFlag(FLAGS_hardware);
  if (name.empty()) return std::optional<client::HardwareType>();
  absl::StatusOr<client::HardwareType> type = client::ParseHardwareType(name);
  if (!type.ok()) return type.status();
  return std::optional<client::HardwareType>(*type);
}

int RunBatchSize(const client::Client& client, const GlobalOptions& options, const Args&) {
  auto hardware = HardwareFlag();
  if (!hardware.ok()) return ReportError(hardware.status());
  auto rec = client.GetBatchSizeRecommendation(*hardware);
  if (!rec.ok()) return ReportError(rec.status());
  if (options.json) {
    std::printf("%s\n", ToJson(*rec).c_str());
    return 0;
  }
  std::printf("hardware:  %s\nmin:       %lld\noptimal:   %lld\ncritical:  %lld\nnotes:     %s\n",
              std::string(client::HardwareTypeName(rec->hardware_type)).c_str(),
              static_cast<long long>(rec->min_batch_size),
              static_cast<long long>(rec->optimal_batch_size),
              static_cast<long long>(rec->critical_batch_size), rec->notes.c_str());
  if (rec->roofline.has_value()) {
    std::printf("roofline:  %.0f (%.3g FLOP/s / %.3g B/s: %s)\n",
                rec->roofline->critical_batch_size, rec->roofline->peak_flops_per_second,
                rec->roofline->memory_bytes_per_second, rec->roofline->source.c_str());
  }
  return 0;
}

int RunValidateBatchSize(const client::Client& client, const GlobalOptions& options,
                         const Args& args) {
  int64_t batch_size = 0;
  if (args.size() != 1 || !absl::SimpleAtoi(args[0], &batch_size)) {
    std::fprintf(stderr, "placectl: usage: placectl validate-batch-size N\n");
    return 2;
  }
  auto hardware = HardwareFlag();
  if (!hardware.ok()) return ReportError(hardware.status());
  auto v = client.ValidateBatchSize(batch_size, absl::GetFlag(FLAGS_warn_suboptimal), *hardware);
  if (!v.ok()) return ReportError(v.status());
  if (options.json) {
    std::printf("%s\n", ToJson(*v).c_str());
    return 0;
  }
  std::printf("valid:   %s\nmessage: %s\n", v->valid ? "true" : "false", v->message.c_str());
  for (const auto& w : v->warnings) std::printf("warning: %s\n", w.c_str());
  return 0;
}

}  // namespace placement::placectl
