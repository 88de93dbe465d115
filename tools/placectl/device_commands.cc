// placectl devices | info | status | batch-size | validate-batch-size.
#include <cstdio>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "placement/client/types.h"
#include "tools/placectl/commands.h"
#include "tools/placectl/names.h"
#include "tools/placectl/output.h"

ABSL_FLAG(std::string, hardware, "",
          "batch-size / validate-batch-size: hardware to ask about (h100, tpu_v5e, ...); "
          "default: the detected hardware.");
ABSL_FLAG(std::string, tenant, "",
          "trim: free only this tenant's cached device memory (default: every tenant's, "
          "admins only with authentication on).");
ABSL_FLAG(bool, warn_suboptimal, true,
          "validate-batch-size: warn when below the critical batch size (the seed's default).");

namespace placement::placectl {
namespace {

// --hardware as a HardwareType; nullopt when unset (the detected type).
// INVALID_ARGUMENT "unknown hardware type 'x'; accepted values: ..." for a
// name the seeds do not know (checked before connecting).
absl::StatusOr<std::optional<client::HardwareType>> HardwareFlag() {
  std::string name = absl::GetFlag(FLAGS_hardware);
  if (name.empty()) return std::optional<client::HardwareType>();
  absl::StatusOr<client::HardwareType> type = client::ParseHardwareType(name);
  if (!type.ok()) return type.status();
  return std::optional<client::HardwareType>(*type);
}

// "0-3" for 4 devices from 0; "4" for one; "-" for none.
std::string DeviceRange(const client::ProcessStatus& p) {
  if (p.num_devices <= 0) return "-";
  if (p.num_devices == 1) return absl::StrCat(p.first_device_id);
  return absl::StrCat(p.first_device_id, "-", p.first_device_id + p.num_devices - 1);
}

// The status's cluster section: one line for a lone daemon, else the
// membership and a row per process.
std::string ClusterText(const client::DaemonStatus& status) {
  const client::ClusterStatus& c = status.cluster;
  if (c.state == client::ClusterState::kSingle || c.state == client::ClusterState::kUnspecified) {
    return absl::StrCat("cluster:      ", client::ClusterStateName(c.state), "\n");
  }
  std::string out = absl::StrFormat(
      "cluster:      %s, epoch %d, %d processes (this daemon: process %d)\ncoordinator:  "
      "%s\npeer address: %s\n",
      client::ClusterStateName(c.state), c.epoch, c.num_processes, status.process_index,
      c.coordinator_address, c.peer_address);
  std::vector<std::vector<std::string>> rows = {
      {"PROCESS", "STATE", "PEER ADDRESS", "DEVICES", "JOINS"}};
  for (const client::ProcessStatus& p : c.processes) {
    rows.push_back({absl::StrCat(p.process_index), client::ProcessStateName(p.state),
                    p.peer_address.empty() ? "-" : p.peer_address, DeviceRange(p),
                    absl::StrCat(p.joins)});
  }
  return absl::StrCat(out, "\n", FormatTable(rows));
}

}  // namespace

int RunDevices(Session& session, const Args&) {
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  auto devices = client->ListDevices();
  if (!devices.ok()) return ReportError(devices.status());
  if (session.json()) {
    std::printf("%s\n", ToJson(*devices).c_str());
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {
      {"ID", "PLATFORM", "KIND", "HARDWARE", "IN USE", "LIMIT", "NODE"}};
  for (const auto& d : *devices) {
    rows.push_back({absl::StrCat(d.id), d.platform, d.device_kind, HardwareName(d.hardware_type),
                    HumanBytes(d.memory_in_use_bytes), HumanBytes(d.memory_limit_bytes),
                    absl::StrCat(d.process_index)});
  }
  std::printf("%s", FormatTable(rows).c_str());
  return 0;
}

int RunInfo(Session& session, const Args&) {
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  auto info = client->GetDeviceInfo();
  if (!info.ok()) return ReportError(info.status());
  if (session.json()) {
    std::printf("%s\n", ToJson(*info).c_str());
    return 0;
  }
  std::printf("num_devices:   %lld\nhardware_type: %s\nplatforms:     %s\ndevice_kinds:  %s\n",
              static_cast<long long>(info->num_devices), HardwareName(info->hardware_type).c_str(),
              absl::StrJoin(info->platforms, ", ").c_str(),
              absl::StrJoin(info->device_kinds, ", ").c_str());
  for (const auto& d : info->devices) {
    std::printf("  device %lld: %s (%s)\n", static_cast<long long>(d.id), d.platform.c_str(),
                d.device_kind.c_str());
  }
  return 0;
}

int RunStatus(Session& session, const Args&) {
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  auto status = client->GetStatus();
  if (!status.ok()) return ReportError(status.status());
  if (session.json()) {
    std::printf("%s\n", ToJson(*status).c_str());
    return 0;
  }
  std::printf(
      "version:      %s\nbackend:      %s (%s)\ninstance:     %s\naddress:      %s\nuptime:       "
      "%llds\ndevices:      %lld\nmeshes:       %lld\ntensors:      %lld\nstreams:      %lld "
      "prefetch\nbytes in use: %s\nserving:      %s\n",
      status->version.c_str(), status->backend.c_str(), status->backend_note.c_str(),
      status->instance_id.c_str(), status->listen_address.c_str(),
      static_cast<long long>(absl::ToInt64Seconds(status->uptime)),
      static_cast<long long>(status->num_devices), static_cast<long long>(status->num_meshes),
      static_cast<long long>(status->num_tensors),
      static_cast<long long>(status->num_prefetch_streams),
      HumanBytes(status->device_bytes_in_use).c_str(), status->serving ? "yes" : "draining");
  std::printf("%s", ClusterText(*status).c_str());
  return 0;
}

int RunTrim(Session& session, const Args&) {
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  const std::string tenant = absl::GetFlag(FLAGS_tenant);
  auto trim = client->TrimMemory(tenant);
  if (!trim.ok()) return ReportError(trim.status());
  if (session.json()) {
    std::printf("%s\n", ToJson(*trim).c_str());
    return 0;
  }
  std::printf("cache released: %s (%s)\nresident:       %s -> %s\n",
              HumanBytes(trim->cache_bytes_released).c_str(),
              tenant.empty() ? "every tenant" : absl::StrCat("tenant ", tenant).c_str(),
              HumanBytes(trim->resident_bytes_before).c_str(),
              HumanBytes(trim->resident_bytes_after).c_str());
  return 0;
}

int RunBatchSize(Session& session, const Args&) {
  auto hardware = HardwareFlag();
  if (!hardware.ok()) return ReportError(hardware.status());
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  auto rec = client->GetBatchSizeRecommendation(*hardware);
  if (!rec.ok()) return ReportError(rec.status());
  if (session.json()) {
    std::printf("%s\n", ToJson(*rec).c_str());
    return 0;
  }
  std::printf("hardware:  %s\nmin:       %lld\noptimal:   %lld\ncritical:  %lld\nnotes:     %s\n",
              HardwareName(rec->hardware_type).c_str(), static_cast<long long>(rec->min_batch_size),
              static_cast<long long>(rec->optimal_batch_size),
              static_cast<long long>(rec->critical_batch_size), rec->notes.c_str());
  if (rec->roofline.has_value()) {
    std::printf("roofline:  %.0f (%.3g FLOP/s / %.3g B/s: %s)\n",
                rec->roofline->critical_batch_size, rec->roofline->peak_flops_per_second,
                rec->roofline->memory_bytes_per_second, rec->roofline->source.c_str());
  }
  return 0;
}

int RunValidateBatchSize(Session& session, const Args& operands) {
  int64_t batch_size = 0;
  if (!absl::SimpleAtoi(operands[0], &batch_size)) {
    return session.UsageError(absl::StrCat("N must be an integer, got '", operands[0], "'"));
  }
  auto hardware = HardwareFlag();
  if (!hardware.ok()) return ReportError(hardware.status());
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  auto v = client->ValidateBatchSize(batch_size,
                                     absl::GetFlag(FLAGS_warn_suboptimal)
                                         ? client::SuboptimalWarning::kWarn
                                         : client::SuboptimalWarning::kSilent,
                                     *hardware);
  if (!v.ok()) return ReportError(v.status());
  if (session.json()) {
    std::printf("%s\n", ToJson(*v).c_str());
    return 0;
  }
  std::printf("valid:   %s\nmessage: %s\n", v->valid ? "true" : "false", v->message.c_str());
  for (const auto& w : v->warnings) std::printf("warning: %s\n", w.c_str());
  return 0;
}

}  // namespace placement::placectl
