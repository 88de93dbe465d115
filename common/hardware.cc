#include "common/hardware.h"

#include <array>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace placement {
namespace {

struct HardwareNameEntry {
  HardwareType type;
  absl::string_view name;
};

constexpr std::array<HardwareNameEntry, 10> kNames = {{
    {HardwareType::kTpuV5e, "tpu_v5e"},
    {HardwareType::kTpuV5p, "tpu_v5p"},
    {HardwareType::kTpuV4, "tpu_v4"},
    {HardwareType::kH100, "h100"},
    {HardwareType::kA100, "a100"},
    {HardwareType::kV100, "v100"},
    {HardwareType::kCpu, "cpu"},
    {HardwareType::kUnknown, "unknown"},
    {HardwareType::kH200, "h200"},
    {HardwareType::kB200, "b200"},
}};

struct TableRow {
  HardwareType type;
  int64_t min;
  int64_t optimal;
  int64_t critical;
  absl::string_view notes;
};

// The seed's table, verbatim (max_memory_batch_size unset in every row).
constexpr std::array<TableRow, 8> kTable = {{
    {HardwareType::kTpuV5e, 64, 256, 240, "Critical batch size for reaching roofline on TPU v5e."},
    {HardwareType::kTpuV5p, 128, 512, 480,
     "Higher throughput variant, benefits from larger batches."},
    {HardwareType::kTpuV4, 64, 256, 192,
     "Similar characteristics to TPU v5e but slightly lower critical batch."},
    {HardwareType::kH100, 64, 320, 298, "Critical batch size for reaching roofline on H100."},
    {HardwareType::kA100, 32, 256, 240,
     "A100 80GB variant. 40GB variant may need smaller batches."},
    {HardwareType::kV100, 16, 128, 96, "Older generation, memory-limited on 16GB variant."},
    {HardwareType::kCpu, 1, 32, 16,
     "CPU is memory-bandwidth bound, smaller batches often sufficient."},
    {HardwareType::kUnknown, 32, 128, 64, "Conservative defaults for unknown hardware."},
}};

struct RooflineFact {
  HardwareType type;
  double flops;
  double bandwidth;
  absl::string_view source;
};

constexpr std::array<RooflineFact, 8> kRooflines = {{
    {HardwareType::kH100, 989e12, 3.35e12, "H100 SXM: 989 TFLOP/s dense bf16, 3.35 TB/s HBM3"},
    {HardwareType::kH200, 989e12, 4.8e12, "H200 SXM: 989 TFLOP/s dense bf16, 4.8 TB/s HBM3e"},
    {HardwareType::kA100, 312e12, 2.039e12,
     "A100 80GB SXM: 312 TFLOP/s dense bf16, 2.039 TB/s HBM2e"},
    {HardwareType::kV100, 125e12, 0.9e12, "V100: 125 TFLOP/s fp16 tensor core, 0.9 TB/s HBM2"},
    {HardwareType::kTpuV5e, 197e12, 8.2e11, "TPU v5e: 197 TFLOP/s bf16, 819 GB/s HBM"},
    {HardwareType::kTpuV4, 275e12, 1.2e12, "TPU v4: 275 TFLOP/s bf16, 1.2 TB/s HBM"},
    {HardwareType::kTpuV5p, 459e12, 2.765e12, "TPU v5p: 459 TFLOP/s bf16, 2.765 TB/s HBM"},
    {HardwareType::kB200, 2.25e15, 8e12, "B200: 2.25 PFLOP/s dense bf16, 8 TB/s HBM3e"},
}};

const TableRow& RowFor(HardwareType type) {
  for (const auto& row : kTable) {
    if (row.type == type) return row;
  }
  return kTable.back();  // UNKNOWN
}

std::string AcceptedNames() {
  std::vector<absl::string_view> names;
  for (const auto& e : kNames) names.push_back(e.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::string_view HardwareTypeName(HardwareType type) {
  for (const auto& e : kNames) {
    if (e.type == type) return e.name;
  }
  return "unknown";
}

absl::StatusOr<HardwareType> ParseHardwareType(absl::string_view name) {
  std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
  absl::string_view stripped = lower;
  absl::ConsumePrefix(&stripped, "hardware_type_");
  for (const auto& e : kNames) {
    if (stripped == e.name) return e.type;
  }
  // Echo at most 64 bytes: a name of any length must not make the error
  // itself too large to send (gRPC's metadata limit).
  constexpr size_t kEchoed = 64;
  if (name.size() > kEchoed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown hardware type '", name.substr(0, kEchoed), "...' (", name.size(),
        " bytes; names are at most ", kEchoed, "); accepted values: ", AcceptedNames()));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown hardware type '", name, "'; accepted values: ", AcceptedNames()));
}

absl::StatusOr<HardwareType> HardwareTypeFromProtoValue(int value) {
  for (const auto& e : kNames) {
    if (static_cast<int>(e.type) == value) return e.type;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown hardware_type enum value ", value,
                                                 "; accepted values: ", AcceptedNames()));
}

HardwareType DetectHardwareType(absl::string_view platform, absl::string_view device_kind) {
  std::string kind = absl::AsciiStrToLower(device_kind);
  std::string plat = absl::AsciiStrToLower(platform);
  if (plat == "tpu") {
    if (absl::StrContains(kind, "v5e") || absl::StrContains(kind, "v5 lite")) {
      return HardwareType::kTpuV5e;
    }
    if (absl::StrContains(kind, "v5p")) return HardwareType::kTpuV5p;
    if (absl::StrContains(kind, "v4")) return HardwareType::kTpuV4;
    // The seed maps any other TPU to v4; a plain "v5" kind is a v5p.
    if (absl::StrContains(kind, "v5")) return HardwareType::kTpuV5p;
    return HardwareType::kTpuV4;
  }
  if (plat == "gpu" || plat == "cuda") {
    if (absl::StrContains(kind, "h100")) return HardwareType::kH100;
    if (absl::StrContains(kind, "h200")) return HardwareType::kH200;
    if (absl::StrContains(kind, "b200")) return HardwareType::kB200;
    if (absl::StrContains(kind, "a100")) return HardwareType::kA100;
    if (absl::StrContains(kind, "v100")) return HardwareType::kV100;
    return HardwareType::kUnknown;
  }
  if (plat == "cpu") return HardwareType::kCpu;
  return HardwareType::kUnknown;
}

std::optional<Roofline> GetRoofline(HardwareType type) {
  for (const auto& f : kRooflines) {
    if (f.type == type) {
      return Roofline{f.flops, f.bandwidth, f.flops / f.bandwidth, std::string(f.source)};
    }
  }
  return std::nullopt;
}

BatchSizeRecommendation GetBatchSizeRecommendation(HardwareType type) {
  const TableRow& row = RowFor(type);
  BatchSizeRecommendation rec;
  rec.hardware_type = type;
  rec.min_batch_size = row.min;
  rec.optimal_batch_size = row.optimal;
  rec.critical_batch_size = row.critical;
  rec.notes = std::string(row.notes);
  rec.roofline = GetRoofline(type);
  return rec;
}

BatchSizeValidation ValidateBatchSize(int64_t batch_size, bool warn_suboptimal, HardwareType type,
                                      int64_t data_parallel_devices) {
  const BatchSizeRecommendation rec = GetBatchSizeRecommendation(type);
  const absl::string_view hw = HardwareTypeName(type);
  BatchSizeValidation out;
  if (batch_size < rec.min_batch_size) {
    out.valid = false;
    out.message = absl::StrCat("Batch size ", batch_size, " is below minimum recommended ",
                               rec.min_batch_size, " for ", hw,
                               ". Performance will be significantly degraded.");
  } else if (batch_size < rec.critical_batch_size && warn_suboptimal) {
    out.valid = true;
    out.message =
        absl::StrCat("Batch size ", batch_size, " is below critical size ", rec.critical_batch_size,
                     " for ", hw, ". Consider increasing for optimal throughput.");
  } else if (batch_size >= rec.optimal_batch_size) {
    out.valid = true;
    out.message = absl::StrCat("Batch size ", batch_size, " is optimal for ", hw, ".");
  } else {
    out.valid = true;
    out.message = absl::StrCat("Batch size ", batch_size, " is acceptable for ", hw, ".");
  }
  if (data_parallel_devices > 1 && batch_size > 0 && batch_size % data_parallel_devices != 0) {
    out.warnings.push_back(absl::StrCat("batch size ", batch_size, " is not divisible by the ",
                                        data_parallel_devices,
                                        " data-parallel devices; shards would be uneven"));
  }
  return out;
}

}  // namespace placement
