#include "server/mesh/mesh_presets.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace placement::server {
namespace {

absl::Status CheckSize(int64_t size, absl::string_view field) {
  if (size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is ", size, "; it must be >= 1"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<MeshAxis>> PresetAxes(const MeshPreset& preset,
                                                 int64_t available_devices) {
  switch (preset.kind) {
    case MeshPresetKind::kDataParallel:
    case MeshPresetKind::kModelParallel: {
      const bool data = preset.kind == MeshPresetKind::kDataParallel;
      const std::string prefix = data ? "data_parallel" : "model_parallel";
      const std::string name =
          preset.axis_name.empty() ? std::string(data ? "data" : "model") : preset.axis_name;
      RETURN_IF_ERROR(ValidateAxisName(name, absl::StrCat(prefix, ".axis_name")));
      const int64_t n = preset.num_devices.value_or(available_devices);
      RETURN_IF_ERROR(CheckSize(n, absl::StrCat(prefix, ".num_devices")));
      return std::vector<MeshAxis>{{name, n}};
    }
    case MeshPresetKind::kHybrid: {
      const std::string data_axis = preset.data_axis.empty() ? "data" : preset.data_axis;
      const std::string model_axis = preset.model_axis.empty() ? "model" : preset.model_axis;
      RETURN_IF_ERROR(ValidateAxisName(data_axis, "hybrid.data_axis"));
      RETURN_IF_ERROR(ValidateAxisName(model_axis, "hybrid.model_axis"));
      if (data_axis == model_axis) {
        return absl::InvalidArgumentError(
            absl::StrCat("hybrid.data_axis and hybrid.model_axis are both '", data_axis,
                         "'; the two axes need different names"));
      }
      const int64_t dp = preset.data_parallel_size.value_or(1);
      const int64_t mp = preset.model_parallel_size.value_or(1);
      RETURN_IF_ERROR(CheckSize(dp, "hybrid.data_parallel_size"));
      RETURN_IF_ERROR(CheckSize(mp, "hybrid.model_parallel_size"));
      return std::vector<MeshAxis>{{data_axis, dp}, {model_axis, mp}};
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("mesh preset kind ", static_cast<int>(preset.kind), " is not a preset"));
}

}  // namespace placement::server
