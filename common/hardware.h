// Hardware generations and the seed's hardware-aware batch-size advice
// (artifex DevicePlacement): detection from a device kind, the
// recommendation table verbatim, validate_batch_size's four rules, and a
// roofline figure (peak dense bf16 FLOP/s / memory bandwidth) beside the
// table where the hardware is known.
//
// Pure functions over constant tables; thread-safe.
#ifndef PLACEMENT_COMMON_HARDWARE_H_
#define PLACEMENT_COMMON_HARDWARE_H_

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace placement {

// Values equal the proto enum placement.v1.HardwareType.
enum class HardwareType : int {
  kTpuV5e = 1,
  kTpuV5p = 2,
  kTpuV4 = 3,
  kH100 = 4,
  kA100 = 5,
  kV100 = 6,
  kCpu = 7,
  kUnknown = 8,
  kH200 = 9,
  kB200 = 10,
};

// The seed's enum string value: "tpu_v5e", "tpu_v5p", "tpu_v4", "h100",
// "a100", "v100", "cpu", "unknown", plus "h200", "b200".
absl::string_view HardwareTypeName(HardwareType type);

// Inverse of HardwareTypeName, case-insensitive; also accepts the enum
// spelling ("TPU_V5E", "HARDWARE_TYPE_H100"). INVALID_ARGUMENT naming every
// accepted value otherwise.
absl::StatusOr<HardwareType> ParseHardwareType(absl::string_view name);

// From the proto enum's integer value. INVALID_ARGUMENT for values outside it.
absl::StatusOr<HardwareType> HardwareTypeFromProtoValue(int value);

// Detection from the first device (docs/seeds.md): platform "tpu":
// "v5e"/"v5 lite" -> v5e, "v5p" -> v5p, "v4" -> v4, other "v5" -> v5p, else
// v4. Platform "gpu": "h100", "h200", "b200", "a100", "v100", else UNKNOWN
// (the seed falls back to A100; we keep the kind string instead). "cpu" ->
// CPU; anything else (or no devices: pass empty strings) -> UNKNOWN.
HardwareType DetectHardwareType(absl::string_view platform, absl::string_view device_kind);

struct Roofline {
  double peak_flops_per_second = 0;    // dense bf16
  double memory_bytes_per_second = 0;  // HBM / device memory
  double critical_batch_size = 0;      // the ratio of the two
  std::string source;                  // what the numbers describe
};

struct BatchSizeRecommendation {
  HardwareType hardware_type = HardwareType::kUnknown;
  int64_t min_batch_size = 0;
  int64_t optimal_batch_size = 0;
  int64_t critical_batch_size = 0;
  std::optional<int64_t> max_memory_batch_size;  // unset in every seed row
  std::string notes;
  std::optional<Roofline> roofline;  // where the hardware is known
};

// The seed's table row for `type`; a type missing from the table (H200,
// B200) gets the UNKNOWN row's numbers, with `hardware_type` and the
// roofline of the asked type.
BatchSizeRecommendation GetBatchSizeRecommendation(HardwareType type);

// Roofline facts where known (every accelerator in the enum; not CPU or
// UNKNOWN).
std::optional<Roofline> GetRoofline(HardwareType type);

struct BatchSizeValidation {
  bool valid = false;
  std::string message;                // exactly the seed's text
  std::vector<std::string> warnings;  // extra structured advice
};

// The seed's validate_batch_size(b, warn_suboptimal), rules in order:
// b < min -> invalid; b < critical and warn_suboptimal -> "below critical";
// b >= optimal -> "optimal"; otherwise "acceptable". Zero and negatives fall
// under the first rule. When `data_parallel_devices` > 1 and b does not
// divide by it, a warning is added (valid/message unchanged).
BatchSizeValidation ValidateBatchSize(int64_t batch_size, bool warn_suboptimal,
                                      HardwareType type, int64_t data_parallel_devices = 1);

}  // namespace placement

#endif  // PLACEMENT_COMMON_HARDWARE_H_
